"""A job whose every rank is gone: did it end, or did it die?

When one rank fails, its launcher ends the others (torchrun's agent checks its ranks every
0.1 s by default and sends SIGTERM to the rest at once), and when ranks wait for a peer that
never comes, the NCCL watchdog ends them and the job goes with them. Either way the whole job
can vanish between two samples, before any stall clock runs or any peer is seen spinning for
a dead rank. Nothing would then be said, and the exit code would be 0: a death read as a
normal end. A death needs no clock, so the last words decide:

- a rank that left words of its own (a traceback, a CUDA error, the OOM killer, a segfault,
  its launcher's record of a non-zero exit) died: it leads, "rank 1 died: RuntimeError: ...",
  the first such rank when several did (by the time a source dates it, else by rank);
- ranks whose only words are the NCCL watchdog's timeout waited for another rank: "ranks
  0-2 were ended by the NCCL watchdog after 20 s waiting for rank 3", the rank waited for
  found by the sequence numbers the watchdog prints (the victims timed out in collective
  #4; rank 3's "last enqueued work" is 3: it never entered it);
- ranks with no words of their own ended with the job: "were ended by their launcher" when
  one launcher started them, else "ended with it, without words of their own";
- every rank silent (or only words that are no error, such as a TCPStore warning as the
  store's rank leaves): the job ended, no alarm.

Pure: the lastwords record in, sentences out; the same record replays to the same words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gputui.diagnose.gone.explain import words_of
from gputui.diagnose.gone.lastwords import Words
from gputui.diagnose.gone.watchdog import after_s, is_victim, lost_peer, ranks_words
from gputui.diagnose.ranking import Finding, Strength
from gputui.textsafe import clean

KIND = "lastwords"
MAX_RANKS = 1024
# "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, ..." (the victims) and
# "last enqueued work: 4, last completed work: 3" / "Last enqueued NCCL work: 3" (any rank
# that saw the dump signal): how far each rank got.
_SEQ = re.compile(r"WorkNCCL\(SeqNum=(\d{1,12})")
_ENQUEUED = re.compile(r"[Ll]ast enqueued (?:NCCL )?work: (\d{1,12})")


@dataclass(frozen=True)
class Ended:
    """Why a vanished job ended: the headline, its findings (strongest first), the rank that
    leads (rank, pid, frame) and check --json's `ended` object."""

    headline: str
    findings: tuple[Finding, ...]
    rank: int | None = None
    pid: int | None = None
    frame: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _entries(record: dict[str, Any], gone: set[int]) -> list[tuple[dict[str, Any], Words]]:
    out = []
    ranks = record.get("ranks")
    for e in ranks[:MAX_RANKS] if isinstance(ranks, list) else ():
        if not isinstance(e, dict) or not isinstance(e.get("pid"), int):
            continue
        if e["pid"] in gone:
            e = {**e, "gone": True}
        if e.get("gone"):
            out.append((e, words_of(e)))
    return out


def _signalled(entries: list[tuple[dict[str, Any], Words]]) -> set[int]:
    """Pids the launcher's own report says it ended with SIGTERM ("exitcode: -15 (pid: N)"):
    in an output the ranks share without `[rankN]:` marks, the one traceback there is every
    rank's tail, and the report tells the rank that raised from those it stopped."""
    from gputui.diagnose.gone.late import launcher_exits

    out: set[int] = set()
    for e, _w in entries[:64]:
        for x in launcher_exits(_tail(e)):
            if x.pid is not None and x.code == -15:
                out.add(x.pid)
    return out


def _own_cause(e: dict[str, Any], w: Words, stopped: set[int]) -> str | None:
    """The rank's own reason to die: its words, else its launcher's record of a failure."""
    if is_victim(e, w) or lost_peer(e, w) or e.get("pid") in stopped:
        return None
    cause = w.cause()
    if cause and (w.exception or w.cuda or w.kernel):
        return cause
    ex = e.get("exit")
    if isinstance(ex, dict) and isinstance(ex.get("code"), int) and ex["code"] not in (0, -15):
        said = ex.get("words")
        return said[:200] if isinstance(said, str) else f"exit code {ex['code']}"
    return None


def _tail(e: dict[str, Any]) -> str:
    tail = e.get("tail")
    return tail[-65536:] if isinstance(tail, str) else ""


def _waited_for(
    victims: Sequence[dict[str, Any]], others: Sequence[dict[str, Any]]
) -> tuple[list[int], int | None]:
    """The ranks the watchdog's victims waited for, and the collective they timed out in:
    the others whose last enqueued collective is below it, else every other rank."""
    seqs = [int(m.group(1)) for e in victims if (m := _SEQ.search(_tail(e)))]
    seq = max(seqs) if seqs else None
    ranked = [e for e in others if isinstance(e.get("rank"), int)]
    behind = []
    for e in ranked:
        got = [int(x) for x in _ENQUEUED.findall(_tail(e))]
        if seq is not None and got and max(got) < seq:
            behind.append(e["rank"])
    return (behind or sorted({e["rank"] for e in ranked})), seq


def _first(own: list[tuple[dict[str, Any], Words, str]]) -> tuple[dict[str, Any], Words, str]:
    """The rank that died first: by the time a source dates it, else the lowest rank."""

    def key(item: tuple[dict[str, Any], Words, str]) -> tuple[float, int]:
        e = item[0]
        died = e.get("died_at")
        t = float(died) if isinstance(died, (int, float)) else float("inf")
        rank = e.get("rank")
        return t, rank if isinstance(rank, int) else 1 << 30

    return min(own, key=key)


def _who(ranks: Sequence[int], pids: Sequence[int]) -> str:
    if ranks:
        return ranks_words(ranks)
    return "pid " + ", ".join(map(str, pids[:8])) if pids else "its other processes"


def job_ended(record: dict[str, Any], gone: set[int], launcher: str | None = None) -> Ended | None:
    """Why the job whose ranks `gone` (pids) all left ended; None when none of them left
    words of a death (a normal end is no alarm). `launcher`: "torchrun (pid 800)" when one
    process started them all.

    Args:
        record: the job's `lastwords` record.
        gone: the pids of the job's ranks that all left.
        launcher: the process that started them all (`torchrun (pid 800)`), when there is one.

    Returns:
        Why the job ended (Ended: its headline, findings and leading rank), or None when no rank
        left words of a death.
    """
    entries = _entries(record, gone)
    stopped = _signalled(entries)
    own = [(e, w, c) for e, w in entries if (c := _own_cause(e, w, stopped))]
    victims = [e for e, w in entries if is_victim(e, w)]
    lost = [e for e, w in entries if lost_peer(e, w) and not is_victim(e, w)]
    if not own and not victims and not lost:
        return None
    told = {id(e) for e, _w, _c in own} | {id(e) for e in victims} | {id(e) for e in lost}
    quiet = [e for e, _w in entries if id(e) not in told]
    found: list[Finding] = []
    lead: tuple[dict[str, Any], Words, str] | None = _first(own) if own else None
    extra: dict[str, Any] = {}
    if lead is not None:
        e, w, cause = lead
        rank = e.get("rank") if isinstance(e.get("rank"), int) else None
        who = f"rank {rank}" if rank is not None else f"pid {e['pid']}"
        text = f"{who} died: {cause}"
        found.append(
            Finding(
                clean(text, limit=400),
                Strength.RANK_GONE,
                KIND,
                ranks=(rank,) if rank is not None else (),
                gpus=tuple(g for g in (e.get("gpus") or [])[:8] if isinstance(g, int)),
                pids=(e["pid"],),
                frame=w.frame,
            )
        )
        extra["first"] = {"rank": rank, "pid": e["pid"], "cause": cause}
        for e2, _w2, c2 in own:
            if e2 is not e:
                r2 = e2.get("rank")
                who2 = f"rank {r2}" if isinstance(r2, int) else f"pid {e2['pid']}"
                found.append(
                    Finding(clean(f"{who2} died too: {c2}", limit=400), Strength.CONTEXT, KIND)
                )
    if victims:
        ended = sorted({e["rank"] for e in victims if isinstance(e.get("rank"), int)})
        others = [e for e, _w in entries if id(e) not in {id(v) for v in victims}]
        waited, seq = _waited_for(victims, others)
        secs = next((s for e in victims if (s := after_s(_tail(e))) is not None), None)
        verb = "was" if len(victims) == 1 else "were"
        after = f" after {secs:g} s" if secs is not None else ""
        whom = f" waiting for {ranks_words(waited)}" if waited else " waiting in a collective"
        who = _who(ended, [e["pid"] for e in victims])
        text = f"{who} {verb} ended by the NCCL watchdog{after}{whom}"
        if waited and seq is not None and lead is None:
            text += f" (collective #{seq}, which {ranks_words(waited)} never entered)"
        strength = Strength.CONTEXT if lead is not None else Strength.RANK_GONE
        found.append(Finding(clean(text, limit=400), strength, KIND, ranks=tuple(waited)))
        extra["watchdog"] = {"ended": ended, "after_s": secs, "waited_for": waited, "seq": seq}
        if lead is None:
            waited_set = set(waited)
            quiet = [e for e in quiet if e.get("rank") not in waited_set]
    if lost:
        ranks = sorted({e["rank"] for e in lost if isinstance(e.get("rank"), int)})
        verb = "was" if len(lost) == 1 else "were"
        text = f"{_who(ranks, [e['pid'] for e in lost])} {verb} ended when a peer went away"
        strength = Strength.CONTEXT if (lead or victims) else Strength.RANK_GONE
        found.append(Finding(clean(text, limit=400), strength, KIND, ranks=tuple(ranks)))
    if quiet:
        ranks = sorted({e["rank"] for e in quiet if isinstance(e.get("rank"), int)})
        verb = "was" if len(quiet) == 1 else "were"
        who = _who(ranks, [e["pid"] for e in quiet])
        if launcher:
            their = "its" if len(quiet) == 1 else "their"
            text = (
                f"{who} {verb} ended by {their} launcher, {launcher}, without words of {their} own"
            )
        else:
            their = "its" if len(quiet) == 1 else "their"
            text = f"{who} ended with the job, without words of {their} own"
        found.append(Finding(clean(text, limit=400), Strength.CONTEXT, KIND, ranks=tuple(ranks)))
        extra["quiet"] = ranks
    found.sort(key=lambda f: -f.strength)
    head = found[0]
    rank = head.ranks[0] if lead is not None and head.ranks else None
    pid = head.pids[0] if head.pids else None
    return Ended(head.text, tuple(found), rank, pid, lead[1].frame if lead else None, extra)
