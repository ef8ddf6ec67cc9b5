"""What PyTorch's debug server says about a stalled job: every rank's line, on every node.

Pure: reads the `{"type": "debugserver"}` record (gputui.collect.nccl.debugserver), live or from
a recording, so a replay says what the live run said. The record is untrusted: anything
malformed becomes a finding that says so, never an exception.

The debug server gives what the local stack dump cannot: the stack of a rank on another
node, and each rank's flight recorder (the last collective it entered, by sequence number,
per process group). Read like the other sources (gputui.diagnose.ranking):

- ranks whose flight recorders stand at different sequence numbers (a rank that never
  entered the collective the others wait in), or at the same number in different
  collectives, are a MISMATCH: "rank 5 on node-b (via the debug server) is in load_batch
  (train.py:88), behind: the others entered all_reduce #42";
- waiting ranks at different collective call sites are a MISMATCH too;
- a rank outside any collective at a known line of Python while others wait in one is a
  CULPRIT_LINE: "rank 5 on node-b (via the debug server) is in load_batch (train.py:88)";
- where the server was, how it was found, and what it could not say are CONTEXT.

A rank on this node is named with its pid (the record maps it), so the verdict's suspects
include it; a rank elsewhere is named by its host.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gputui.collect.frames import Frame
from gputui.collect.model import Snapshot
from gputui.collect.nccl.debugserver_parse import KIND, ranks_of_record
from gputui.diagnose.evidence import Evidence
from gputui.diagnose.hang.culprit import Reading, read_stack
from gputui.diagnose.rank_lists import ranks_text
from gputui.diagnose.ranking import Finding, Strength
from gputui.diagnose.verdict import Verdict

MAX_NAMED = 4  # ranks named one by one in a sentence; more are grouped
MAX_EXTRA_RANKS = 64  # rank entries in check --json's `debugserver` (the odd ones first)


@dataclass(frozen=True)
class _Rank:
    rank: int
    host: str | None
    here: bool
    pid: int | None
    outcome: str
    frames: tuple[Frame, ...]
    reading: Reading
    fr: tuple[dict[str, Any], ...]
    error: str | None

    @property
    def line(self) -> str | None:
        return self.reading.frame.label() if self.reading.frame is not None else None


def explain_debugserver(
    record: dict[str, Any], verdict: Verdict, snap: Snapshot | None
) -> Evidence:
    """The findings of one debugserver record for the verdict of the stalled job.

    Args:
        record: a `debugserver` record (possibly from an untrusted recording).
        verdict: the verdict of the job it was gathered for.
        snap: the sample it was gathered at; None when not known.

    Returns:
        Evidence of kind `debugserver`: ranked findings, and the ranks' answers in `extra`.
    """
    try:
        entries = ranks_of_record(record)
    except ValueError as e:
        return _context(f"the debug server's record could not be read: {e}")
    via = "the debug server's dump" if record.get("via") == "dump" else "the debug server"
    head = _where(record, via)
    if record.get("outcome") != "done":
        err = str(record.get("error") or record.get("outcome"))[:400]
        return _context(f"{head}: no answer: {err}", record)
    ranks = [_rank(e) for e in entries]
    found: list[Finding] = []
    found += _fr_findings(ranks, via)
    found += _stack_findings(ranks, via)
    found.append(Finding(_summary(head, ranks, record), Strength.CONTEXT, KIND))
    if record.get("error"):
        found.append(Finding(f"{via}: {str(record['error'])[:300]}", Strength.CONTEXT, KIND))
    suspects = tuple(dict.fromkeys(p for f in found if f.strength > Strength.NVML for p in f.pids))
    return Evidence(
        KIND,
        findings=tuple(f.text for f in found),
        ranked=tuple(found),
        suspect_pids=suspects,
        extra=_extra(record, ranks, found),
    )


def _rank(e: dict[str, Any]) -> _Rank:
    frames = tuple(e["frames"])
    reading = read_stack(frames) if frames else Reading(None, None, None)
    fr = tuple(g for g in e.get("fr") or () if isinstance(g, dict))
    return _Rank(
        e["rank"],
        e.get("host"),
        e.get("here") is True,
        e.get("pid"),
        str(e.get("outcome") or "failed"),
        frames,
        reading,
        fr,
        e.get("error"),
    )


def _where(record: dict[str, Any], via: str) -> str:
    if record.get("via") == "dump":
        dump = record.get("dump") if isinstance(record.get("dump"), dict) else {}
        written = dump.get("written") if isinstance(dump, dict) else None
        when = ""
        if isinstance(written, (int, float)) and 0 < written < 4e9:
            when = f" of {time.strftime('%H:%M:%S', time.localtime(written))}"
            t = record.get("t")
            if isinstance(t, (int, float)) and t >= written:
                when += f" ({t - written:.0f} s before it was read)"
        name = dump.get("file") if isinstance(dump, dict) else None
        return f"{via}{when}" + (f" ({str(name)[:80]})" if name else "")
    server = record.get("server")
    return f"{via} at {str(server)[:80]}" if server else via


def _summary(head: str, ranks: Sequence[_Rank], record: dict[str, Any]) -> str:
    world = record.get("world")
    n = world if isinstance(world, int) and world >= len(ranks) else len(ranks)
    hosts = sorted({r.host for r in ranks if r.host})
    failed = [r.rank for r in ranks if r.outcome != "done"]
    on = f" on {len(hosts)} host{'s' if len(hosts) != 1 else ''}" if hosts else ""
    text = f"{head} answered for {n} rank{'s' if n != 1 else ''}{on}"
    found_by = record.get("found_by")
    if isinstance(found_by, str) and found_by and record.get("via") != "dump":
        text += f" (found by: {found_by[:120]})"
    if failed:
        text += f"; no stack from {ranks_text(failed)}"
    return text


def who(r: _Rank, via: str) -> str:
    """`rank 5 on node-b (via the debug server)`, `rank 1 (pid 815 on this node, via ...)`."""
    if r.here and r.pid is not None:
        return f"rank {r.rank} (pid {r.pid} on this node, via {via})"
    if r.host:
        return f"rank {r.rank} on {r.host} (via {via})"
    return f"rank {r.rank} (via {via})"


def _group_who(rs: Sequence[_Rank], via: str) -> str:
    if len(rs) == 1:
        return who(rs[0], via)
    hosts = sorted({r.host for r in rs if r.host})
    on = f" on {', '.join(hosts[:4])}" + (" ..." if len(hosts) > 4 else "") if hosts else ""
    return f"{ranks_text([r.rank for r in rs])}{on} (via {via})"


def _finding(text: str, strength: Strength, rs: Sequence[_Rank], **kw: Any) -> Finding:
    return Finding(
        text,
        strength,
        KIND,
        ranks=tuple(r.rank for r in rs),
        pids=tuple(r.pid for r in rs if r.here and r.pid is not None),
        **kw,
    )


def _stack_findings(ranks: Sequence[_Rank], via: str) -> list[Finding]:
    """Waiting ranks at different call sites (MISMATCH); ranks outside any collective at a
    known line while others wait (CULPRIT_LINE)."""
    done = [r for r in ranks if r.outcome == "done" and r.reading.frame is not None]
    waiting = [r for r in done if r.reading.collective is not None]
    outside = [r for r in done if r.reading.collective is None]
    out: list[Finding] = []
    sites: dict[str, list[_Rank]] = {}
    for r in waiting:
        where = r.reading.where()
        if where is not None:
            sites.setdefault(where, []).append(r)
    if len(sites) > 1:
        groups = sorted(sites.items(), key=lambda kv: kv[1][0].rank)
        said = ", ".join(f"{ranks_text([r.rank for r in rs])} in {w}" for w, rs in groups)
        odd = min(reversed(groups), key=lambda kv: len(kv[1]))[1]
        site = odd[0].reading.site
        out.append(
            _finding(
                f"ranks entered different collectives (via {via}): {said}",
                Strength.MISMATCH,
                odd,
                frame=site.label() if site is not None else None,
                headline=f"ranks in different collectives (via {via}): {said}",
            )
        )
    if not waiting:
        return out
    by_line: dict[str, list[_Rank]] = {}
    for r in outside:
        by_line.setdefault(r.line or "?", []).append(r)
    for line, rs in sorted(by_line.items(), key=lambda kv: kv[1][0].rank):
        named = [rs] if len(rs) > 2 else [[r] for r in rs]
        for group in named:
            verb = "is" if len(group) == 1 else "are"
            out.append(
                _finding(
                    f"{_group_who(group, via)} {verb} in {line}",
                    Strength.CULPRIT_LINE,
                    group,
                    frame=line,
                )
            )
    if outside and len(sites) == 1:
        ((place, rs),) = sites.items()
        if rs:
            out.append(
                _finding(
                    f"{_group_who(rs, via)} wait{'s' if len(rs) == 1 else ''} in {place}",
                    Strength.CONTEXT,
                    rs,
                )
            )
    return out


def _seq(g: dict[str, Any]) -> int | None:
    for k in ("enqueued", "seq"):
        v = g.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
    return None


def _fr_findings(ranks: Sequence[_Rank], via: str) -> list[Finding]:
    """Per process group: ranks behind the others' sequence number, or at the same number in
    another collective."""
    groups: dict[str, dict[int, tuple[int, str | None]]] = {}
    for r in ranks:
        for g in r.fr:
            pg, seq = g.get("pg"), _seq(g)
            if isinstance(pg, str) and seq is not None:
                op = g.get("op") if isinstance(g.get("op"), str) else None
                groups.setdefault(pg, {})[r.rank] = (seq, op)
    by_rank = {r.rank: r for r in ranks}
    out: list[Finding] = []
    for pg, seqs in sorted(groups.items(), key=lambda kv: (len(kv[0]), kv[0]))[:4]:
        if len(seqs) < 2:
            continue
        top = max(s for s, _ in seqs.values())
        ahead = sorted(r for r, (s, _) in seqs.items() if s == top)
        behind = sorted(r for r, (s, _) in seqs.items() if s < top)
        name = f"process group {pg}"
        if behind:
            op = next((o for r in ahead if (o := seqs[r][1])), "its collective")
            rs = [by_rank[r] for r in behind]
            named = rs[:MAX_NAMED] if len(rs) <= MAX_NAMED else rs
            lines = sorted({r.line for r in named if r.line})
            frame = lines[0] if len(lines) == 1 else None
            last = sorted({f"{o or '?'} #{s}" for r in behind for s, o in [seqs[r]]})
            others = ranks_text(ahead)
            text = (
                f"{_group_who(named, via)} {'is' if len(named) == 1 else 'are'} behind in {name}: "
                f"last entered {', '.join(last[:3])}; {others} entered {op} #{top}"
            )
            verb = "is" if len(named) == 1 else "are"
            at = f" {verb} in {frame}" if frame else f" {verb} behind"
            wait = "waits" if len(ahead) == 1 else "wait"
            head = f"{_group_who(named, via)}{at}: {others} {wait} in {op} #{top}"
            out.append(_finding(text, Strength.MISMATCH, named, frame=frame, headline=head))
            continue
        ops: dict[str, list[int]] = {}
        for n, (_s, o) in seqs.items():
            ops.setdefault(o or "?", []).append(n)
        if len(ops) > 1:
            said = ", ".join(f"{ranks_text(rs)} in {o}" for o, rs in sorted(ops.items()))
            odd = min(reversed(sorted(ops.values())), key=len)
            rs = [by_rank[r] for r in odd]
            lines = sorted({r.line for r in rs if r.line})
            out.append(
                _finding(
                    f"ranks in different collectives at #{top} of {name} (via {via}): {said}",
                    Strength.MISMATCH,
                    rs,
                    frame=lines[0] if len(lines) == 1 else None,
                    headline=f"ranks in different collectives (via {via}): {said}",
                )
            )
    return out


def _extra(
    record: dict[str, Any], ranks: Sequence[_Rank], found: Sequence[Finding]
) -> dict[str, Any]:
    """check --json's `debugserver` entry: where the answer came from, and each rank's line,
    collective and sequence numbers (the ranks the findings name first)."""
    named = {r for f in found if f.strength > Strength.NVML for r in f.ranks}
    order = sorted(ranks, key=lambda r: (r.rank not in named, r.rank))[:MAX_EXTRA_RANKS]
    out: dict[str, Any] = {
        "via": record.get("via"),
        "server": record.get("server"),
        "found_by": record.get("found_by"),
        "outcome": record.get("outcome"),
        "t": record.get("t"),
        "world": record.get("world"),
        "ranks": [
            {
                "rank": r.rank,
                "host": r.host,
                "pid": r.pid if r.here else None,
                "outcome": r.outcome,
                "frame": r.line,
                "collective": r.reading.collective,
                "seq": {str(g.get("pg")): _seq(g) for g in r.fr if isinstance(g.get("pg"), str)},
            }
            for r in sorted(order, key=lambda r: r.rank)
        ],
    }
    if isinstance(record.get("dump"), dict):
        out["dump"] = record["dump"]
    return out


def _context(text: str, record: dict[str, Any] | None = None) -> Evidence:
    extra = {}
    if record is not None:
        extra = {k: record.get(k) for k in ("via", "server", "found_by", "outcome", "t", "error")}
    return Evidence(
        KIND, findings=(text,), ranked=(Finding(text, Strength.CONTEXT, KIND),), extra=extra
    )


def report_lines(extra: Any) -> list[str]:
    """The incident bundle's `debugserver.txt`: where the answer came from and when, and
    each rank's host, line, collective and sequence numbers (check --json's entry as text).

    Args:
        extra: the `debugserver` entry of a verdict's evidence (check --json's).

    Returns:
        The lines of `debugserver.txt`; none when the entry is not one.
    """
    if not isinstance(extra, dict):
        return []
    t = extra.get("t")
    when = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
        if isinstance(t, (int, float)) and 0 < t < 4e9
        else "?"
    )
    src = extra.get("server") or (extra.get("dump") or {}).get("dir") or "?"
    out = [
        f"PyTorch's debug server, via {extra.get('via')} {src}, asked {when}: "
        f"{extra.get('outcome')}",
    ]
    if extra.get("found_by"):
        out.append(f"found by: {extra['found_by']}")
    if extra.get("error"):
        out.append(f"error: {extra['error']}")
    out.append("")
    out.append(f"{'rank':>6}  {'host':<24} {'pid':>8}  {'collective':<14} {'seq':<12} line")
    for r in extra.get("ranks") or []:
        if not isinstance(r, dict):
            continue
        seq = ",".join(f"{k}:{v}" for k, v in (r.get("seq") or {}).items())
        out.append(
            f"{r.get('rank')!s:>6}  {str(r.get('host') or '?')[:24]:<24} "
            f"{str(r.get('pid') or '-'):>8}  {str(r.get('collective') or '-')[:14]:<14} "
            f"{seq[:12]:<12} {r.get('frame') or r.get('outcome')}"
        )
    return out
