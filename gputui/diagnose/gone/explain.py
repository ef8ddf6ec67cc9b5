"""Why a rank is gone: the lastwords record explained into ranked findings.

A gone rank with a cause leads the verdict (Strength.RANK_GONE): "rank 1 (pid 815) died:
RuntimeError: Expected to have finished reduction ... (train.py:88)", "... died: killed by
the OOM killer", "... died: segfault in libnccl.so". Without one it says so honestly, and
where its words went: "rank 1 (pid 815) exited; no message found in its log (stdout is a
pipe to torchrun (pid 800))". A rank still alive that wrote an error is a weaker finding; a
waiting rank's NCCL watchdog line is context (it names the collective, not the cause).

Pure: the record carries the text, so a replay explains the same way.
"""

from __future__ import annotations

from typing import Any

from gputui.collect.model import Snapshot
from gputui.collect.procs.rankio import Stream
from gputui.diagnose.evidence import Evidence
from gputui.diagnose.gone.lastwords import Words, parse_error_file, parse_log
from gputui.diagnose.gone.late import strip_launcher
from gputui.diagnose.kernel_events import kernel_events
from gputui.diagnose.ranking import Finding, Strength
from gputui.diagnose.verdict import Verdict
from gputui.textsafe import clean

KIND = "lastwords"
MAX_RANKS = 1024
ALIVE_LINES = 60  # of a live rank's tail, the last lines that may hold an error it is in


def _who(e: dict[str, Any]) -> str:
    rank, pid = e.get("rank"), e.get("pid")
    away = " (on another node)" if e.get("late") and e.get("local") is False else ""
    if isinstance(rank, int):
        return f"rank {rank}{away} (pid {pid})" if isinstance(pid, int) else f"rank {rank}{away}"
    return f"pid {pid}"


def _age(e: dict[str, Any], now: Any) -> str:
    """ " 14 min ago" when a source dates the death (a late rank's entry), as of the record's
    time: steady while the record is the newest, and the same in a replay."""
    died = e.get("died_at")
    if not isinstance(died, (int, float)) or not isinstance(now, (int, float)):
        return ""
    from gputui.diagnose.gone.late import age_words

    return " " + age_words(float(now) - float(died))


def _kernel(e: dict[str, Any]) -> list[tuple[float, str]]:
    out = []
    for item in e.get("kernel") or ():
        if isinstance(item, list) and len(item) == 2 and isinstance(item[1], str):
            t = item[0] if isinstance(item[0], (int, float)) else 0.0
            out.append((float(t), item[1][:2000]))
    return out[:64]


def words_of(e: dict[str, Any]) -> Words:
    """Everything one rank entry says, merged: log tail, error file, kernel lines.

    Args:
        e: one rank entry of a `lastwords` record.

    Returns:
        The rank's Words: exception, user frame, CUDA and NCCL lines, kernel events.
    """
    rank = e.get("rank") if isinstance(e.get("rank"), int) else None
    tail = e.get("tail")
    text = strip_launcher(tail[-65536:]) if isinstance(tail, str) else ""  # not its words
    w = parse_log(text, rank)
    ef = e.get("error_file_text")
    if isinstance(ef, str) and not w.exception:
        f = parse_error_file(ef[:65536])
        if f.exception:
            w = Words(f.exception, f.frame, w.cuda, w.nccl)
    pid = e.get("pid")
    born = e.get("create_time") if isinstance(e.get("create_time"), (int, float)) else None
    if isinstance(pid, int):
        k = kernel_events(_kernel(e), pid, born)
        w = Words(w.exception, w.frame, w.cuda, w.nccl, k)
    return w


def _where(e: dict[str, Any]) -> str:
    """Where its words went, for the honest "no message" sentence."""
    if not e.get("seen"):
        return "gputui did not see where it wrote: it exited before it was looked at"
    if isinstance(e.get("error"), str):
        return f"where it wrote is unknown: {e['error'][:200]}"  # e.g. /proc not readable
    out, err = Stream.from_json(e.get("stdout")), Stream.from_json(e.get("stderr"))
    if out == err:
        return f"stdout and stderr are {out.words()}"
    return f"stdout is {out.words()}, stderr {err.words()}"


def _cause(e: dict[str, Any], w: Words) -> str | None:
    """The cause, with the GPU an Xid of this pid was on when the rank's GPU is known."""
    cause = w.cause()
    raw = e.get("gpus")
    gpus = [g for g in raw[:8] if isinstance(g, int)] if isinstance(raw, list) else []
    xid = next((k.xid for k in w.kernel if k.how == "xid"), None)
    if cause and gpus and xid is not None:
        on = f"on GPU {gpus[0]}"
        cause = cause.replace(f"(Xid {xid})", f"(Xid {xid} {on})")
        cause = cause.replace(f"Xid {xid} on its GPU", f"Xid {xid} {on}")
    return cause


def _killed_child(e: dict[str, Any], cause: str | None) -> str | None:
    """Its DataLoader worker's death, on the rank's node (gputui.diagnose.hang.children),
    when that is what it died of (torch's error names the worker, or nothing else is said)."""
    from gputui.diagnose.hang.children import killed_child_cause

    tail = e.get("tail")
    if cause and "DataLoader worker" not in cause:
        return None
    where = "its node" if e.get("late") and e.get("local") is False else "this node"
    kernel = [text for _, text in _kernel(e)]
    return killed_child_cause(tail, kernel, where) if isinstance(tail, str) else None


def _sentence(
    e: dict[str, Any], w: Words, now: Any = None, shared: frozenset[str] = frozenset()
) -> tuple[str, Strength] | None:
    """The sentence for one rank's entry and its strength; `shared`: log files that more
    than one rank of the record writes to (an unmarked line there is anybody's)."""
    cause = _cause(e, w)
    who = _who(e)
    if e.get("late"):  # gone before gputui started: from what survives it
        ex = e.get("exit")
        said = ex.get("words") if isinstance(ex, dict) else None
        if not cause and isinstance(ex, dict) and ex.get("code") == -15:
            # SIGTERM from its own launcher, which stops the others when one rank fails:
            # not why the job stopped (that rank's own finding is).
            by = str(ex["by"])[:20] if isinstance(ex.get("by"), str) else "its launcher"
            return (
                f"{who} was stopped by {by} (signal 15) after a rank failed",
                Strength.CONTEXT,
            )
        cause = _killed_child(e, cause) or cause or (said[:200] if isinstance(said, str) else None)
        if cause:
            return f"{who} died{_age(e, now)}: {cause}", Strength.RANK_GONE
        seen = e.get("looked_in")
        looked = [p[:300] for p in seen[:4] if isinstance(p, str)] if isinstance(seen, list) else []
        where = f" ({', '.join(looked)})" if looked else " (they hold no file)"
        return (
            f"{who} exited before gputui started; no message found in the files its peers "
            f"and its launcher hold{where}",
            Strength.RANK_GONE,
        )
    if e.get("gone"):
        from gputui.diagnose.gone.watchdog import is_victim, lost_peer

        if lost_peer(e, w) and not is_victim(e, w):  # another rank's death ended it
            return f"{who} died when a peer went away: {cause}", Strength.CONTEXT
        if is_victim(e, w):  # it waited for another rank: not the job's cause
            said = (cause or "").removeprefix("NCCL watchdog: ")
            return f"{who} was ended by the NCCL watchdog: {said}", Strength.CONTEXT
        if child := _killed_child(e, cause):  # torch's error in the rank names the worker's death
            return f"{who} died: {child}", Strength.RANK_GONE
        if cause:
            return f"{who} died: {cause}", Strength.RANK_GONE
        log = e.get("log")
        said = "no message found in its log" if log else "no message found"
        seen = e.get("looked_in")
        looked = [p[:300] for p in seen[:4] if isinstance(p, str)] if isinstance(seen, list) else []
        if looked and looked != [log]:  # the other files it wrote, beside its stderr
            said = f"no message found in {', '.join(looked)}"
        return f"{who} exited; {said} ({_where(e)})", Strength.RANK_GONE
    if w.exception or w.cuda or w.kernel:
        from gputui.diagnose.gone.whose import whose_error

        whose = whose_error(e.get("tail"), e.get("rank"), w) if not w.kernel else "own"
        if whose == "child":  # a multiprocessing child's traceback in the output it inherited
            return f"a child process of {who} wrote an error into their shared output: {cause}", (
                Strength.CONTEXT
            )
        if whose == "thread":
            return f"a thread of {who} raised, the rank lives on: {cause}", Strength.CONTEXT
        if whose == "unmarked" and str(e.get("log")) in shared:  # any rank writing there may have
            return f"{who}'s output holds an error not marked as its own: {cause}", Strength.NVML
        return f"{who} wrote an error and is still alive: {cause}", Strength.RAS_BEHIND
    if w.nccl:
        return f"{who}: {w.nccl}", Strength.CONTEXT
    return None


def _in_shared(e: dict[str, Any], w: Words, told: dict[tuple[str, str, str], list[int]]) -> bool:
    """A live rank's error in a file several ranks share that is a child's or unmarked:
    noted under the file (said once for all who share it); False when it is the rank's."""
    from gputui.diagnose.gone.whose import whose_error

    if not (w.exception or w.cuda) or w.kernel:
        return False
    whose = whose_error(e.get("tail"), e.get("rank"), w)
    if whose not in ("child", "unmarked"):
        return False
    rank = e.get("rank")
    ranks = told.setdefault((str(e["log"]), whose, _cause(e, w) or ""), [])
    if isinstance(rank, int):
        ranks.append(rank)
    return True


def shared_findings(told: dict[tuple[str, str, str], list[int]]) -> list[Finding]:
    """One finding per error found in a shared output file that no rank can own."""
    from gputui.diagnose.gone.watchdog import ranks_words

    out = []
    for (path, whose, cause), ranks in list(told.items())[:16]:
        who = ranks_words(ranks) if ranks else "its ranks"
        where = f"the output {who} share ({path})"
        if whose == "child":
            text = f"a child process wrote an error into {where}: {cause}"
            strength = Strength.CONTEXT
        else:
            text = f"{where} holds an error no rank marked as its own: {cause}"
            strength = Strength.NVML
        out.append(Finding(clean(text, limit=400), strength, KIND))
    return out


def entry_json(e: dict[str, Any], w: Words) -> dict[str, Any]:
    """One rank's `last_words` in check --json (text kept as written: JSON escapes it)."""
    return {
        "rank": e.get("rank"),
        "pid": e.get("pid"),
        "gone": bool(e.get("gone")),
        "cause": _cause(e, w),
        "last_words": w.to_json(),
        "stdout": Stream.from_json(e.get("stdout")).words() if e.get("seen") else None,
        "stderr": Stream.from_json(e.get("stderr")).words() if e.get("seen") else None,
        "log": e.get("log"),
        "core": e.get("core"),
        **{k: e[k] for k in _LATE_KEYS if k in e},
    }


# A late rank's entry (gputui.tools.gather.late_words): whose file held its words, the launcher's
# record of its exit, and when it died (Unix time) by which source.
_LATE_KEYS = ("late", "held_by", "exit", "died_at", "dated_by", "looked_in")


def explain_lastwords(record: dict[str, Any], verdict: Verdict, snap: Snapshot | None) -> Evidence:
    """Ranked findings and per-rank `last_words` from a lastwords record.

    Args:
        record: a `lastwords` record (possibly from an untrusted recording).
        verdict: the verdict of the job it was gathered for.
        snap: the sample it was gathered at; None when not known.

    Returns:
        Evidence of kind `lastwords`: ranked findings, and each rank's last words in `extra`.
    """
    ranks = record.get("ranks")
    if not isinstance(ranks, list):
        return Evidence(KIND, findings=("the lastwords record could not be read",))
    found: list[Finding] = []
    entries = []
    parsed: list[tuple[dict[str, Any], Words]] = []
    gone_pids = {p for p, _ in verdict.gone}
    logs = [e.get("log") for e in ranks[:MAX_RANKS] if isinstance(e, dict)]
    shared = frozenset(p for p in logs if isinstance(p, str) and logs.count(p) > 1)
    in_shared: dict[tuple[str, str, str], list[int]] = {}  # (file, whose, cause) -> ranks
    for e in ranks[:MAX_RANKS]:
        if not isinstance(e, dict):
            continue
        late = e.get("late") is True and isinstance(e.get("rank"), int)
        if not isinstance(e.get("pid"), int) and not late:
            continue
        if late and not isinstance(e.get("pid"), int):
            e = {**e, "pid": None}
        if e["pid"] in gone_pids:
            e = {**e, "gone": True}
        if not e.get("gone") and isinstance(e.get("tail"), str):
            # Alive: only what it wrote last counts (an error it recovered from long ago
            # is not why the job stalls now).
            e = {**e, "tail": "\n".join(e["tail"].splitlines()[-ALIVE_LINES:])}
        w = words_of(e)
        parsed.append((e, w))
        entries.append(entry_json(e, w))
        if not e.get("gone") and str(e.get("log")) in shared and _in_shared(e, w, in_shared):
            continue  # said once for the file, below
        said = _sentence(e, w, record.get("t"), shared)
        if said is None:
            continue
        text, strength = said
        core = e.get("core")
        if e.get("gone") and isinstance(core, str):
            hint = f"gputui dump --core {core}" if core.startswith("/") else core
            text += f"; core: {hint}"
        rank = e.get("rank")
        head = None
        if e.get("gone") and isinstance(rank, int):  # the headline: short, the cause first
            head = clean(text.replace(f" (pid {e['pid']})", "", 1), limit=200)
        raw = e.get("gpus")
        gpus = tuple(g for g in raw[:8] if isinstance(g, int)) if isinstance(raw, list) else ()
        found.append(
            Finding(
                clean(text, limit=400),
                strength,
                KIND,
                ranks=(rank,) if isinstance(rank, int) else (),
                gpus=gpus,
                pids=(e["pid"],) if isinstance(e["pid"], int) else (),
                frame=w.frame,
                headline=head,
            )
        )
    found += shared_findings(in_shared)
    extra: dict[str, Any] = {"ranks": entries} if entries else {}
    from gputui.diagnose.gone.watchdog import watchdog_finding

    dog = watchdog_finding(parsed)
    if dog is not None:  # the ranks it ended, and whom they waited for
        found.insert(0, dog[0])
        extra["watchdog"] = dog[1]
    if record.get("kernel_error"):
        extra["kernel_error"] = record["kernel_error"]
    named = tuple(extra["watchdog"]["pids"]) if "watchdog" in extra else ()
    return Evidence(KIND, ranked=tuple(found), extra=extra, suspect_pids=named)


def crashed_cores(verdict: Any) -> list[tuple[int | None, int, str]]:
    """(rank, pid, core file) of each gone rank whose core the last words found, in the
    order the verdict lists them (the headline's rank first): what the dashboard's `c` reads.

    Args:
        verdict: a verdict with the `lastwords` evidence folded in (its `evidence` entry).

    Returns:
        (rank, pid, core file path) of each gone rank whose core was found, headline's rank first.
    """
    evidence = getattr(verdict, "evidence", None)
    extra = evidence.get(KIND) if isinstance(evidence, dict) else None
    ranks = extra.get("ranks") if isinstance(extra, dict) else None
    out: list[tuple[int | None, int, str]] = []
    for e in ranks if isinstance(ranks, list) else ():
        if not isinstance(e, dict) or not e.get("gone"):
            continue
        core, pid, rank = e.get("core"), e.get("pid"), e.get("rank")
        if isinstance(core, str) and core.startswith("/") and isinstance(pid, int):
            out.append((rank if isinstance(rank, int) else None, pid, core))
    return out
