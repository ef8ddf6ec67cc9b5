"""Ranks ended by the NCCL watchdog: victims of the wait, not its cause.

When a rank stays out of a collective (stuck in its own code), its peers wait in it until
the NCCL watchdog's timeout (`init_process_group(timeout=...)`, 10 min by default), then the
watchdog aborts them. What they leave on stderr names the collective they waited in, never
why: "[rank0]:[E...] [Rank 0] Watchdog caught collective operation timeout:
WorkNCCL(SeqNum=2, OpType=ALLREDUCE, ..., Timeout(ms)=20000) ran for 20002 milliseconds
before timing out." Read as causes, three dead ranks would lead the verdict over the one
that is stuck. So the gone ranks whose only words are the watchdog's become one sentence,
"ranks 0-2 were ended by the NCCL watchdog after 20 s waiting for rank 3", naming the ranks
of the job still alive (the ones they waited for), and their own deaths are context.

Pure: reads the lastwords record's entries and their parsed words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gputui.diagnose.gone.lastwords import Words
from gputui.diagnose.ranking import Finding, Strength

_TIMEOUT = re.compile(r"Timeout\(ms\)=(\d{1,10})")
_RAN = re.compile(r"ran for (\d{1,10}) milliseconds")


def is_victim(e: dict[str, Any], w: Words) -> bool:
    """A gone rank whose words are the watchdog's timeout and nothing of its own."""
    if not e.get("gone") or not w.nccl or "watchdog" not in w.nccl.lower():
        return False
    if w.cuda or w.kernel:
        return False
    ex = w.exception or ""
    return not ex or "watchdog" in ex.lower() or "DistBackendError" in ex


# What a rank says when a peer it talks to is gone: the consequence of another's death.
PEER_LOSS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "remote process exited",
    "NCCL communicator was aborted",
)


def lost_peer(e: dict[str, Any], w: Words) -> bool:
    """A gone rank whose only error says a peer went away (gloo's "Connection closed by
    peer", NCCL's "remote process exited"): it died of another rank's death."""
    if not e.get("gone") or w.kernel or not (w.exception or w.nccl):
        return False
    said = f"{w.exception or ''} {w.nccl or ''}"
    return any(p in said for p in PEER_LOSS)


def after_s(text: str) -> float | None:
    """The watchdog's timeout in seconds, from its line (Timeout(ms)=, else "ran for")."""
    m = _TIMEOUT.search(text) or _RAN.search(text)
    return int(m.group(1)) / 1000.0 if m else None


def ranks_words(ranks: Sequence[int]) -> str:
    """ "rank 3", "ranks 0-2", "ranks 0, 2, 5" (at most 8 named).

    Args:
        ranks: rank numbers.

    Returns:
        The ranks in words: one, a run, or at most 8 listed (then `and N more`).
    """
    rs = sorted(set(ranks))
    if len(rs) == 1:
        return f"rank {rs[0]}"
    if rs == list(range(rs[0], rs[-1] + 1)):
        return f"ranks {rs[0]}-{rs[-1]}"
    more = f" and {len(rs) - 8} more" if len(rs) > 8 else ""
    return "ranks " + ", ".join(map(str, rs[:8])) + more


def timed_out(e: dict[str, Any], w: Words) -> bool:
    """A rank, alive or gone, whose words are the watchdog's timeout and nothing of its own:
    while it lives (the watchdog's abort can take a while: it dumps first) it already says
    the job hangs, whatever NVML reads."""
    return is_victim({**e, "gone": True}, w)


def live_timeouts(
    entries: Sequence[tuple[dict[str, Any], Words]],
) -> tuple[Finding, dict[str, Any]] | None:
    """Live ranks whose stderr holds the NCCL watchdog's timeout (none of them gone): "ranks
    0-2 timed out in the NCCL watchdog after 20 s waiting for rank 3", the ranks without it
    the ones waited for; None when no live rank wrote one.

    Args:
        entries: (rank entry, its Words) of every rank the last words know.

    Returns:
        (the Finding, check --json's `watchdog` object), or None when no live rank wrote a timeout.
    """
    out = [(e, w) for e, w in entries if not e.get("gone") and timed_out(e, w)]
    out = [(e, w) for e, w in out if isinstance(e.get("rank"), int)]
    if not out or any(e.get("gone") for e, _ in entries):
        return None
    said = sorted({e["rank"] for e, _ in out})
    tail = next((e["tail"] for e, _ in out if isinstance(e.get("tail"), str)), "")
    secs = after_s(tail[-65536:])
    waited = sorted(
        {e["rank"] for e, _ in entries if isinstance(e.get("rank"), int) and e["rank"] not in said}
    )
    pids = tuple(
        e["pid"] for e, _ in entries if e.get("rank") in waited and isinstance(e.get("pid"), int)
    )
    after = f" after {secs:g} s" if secs is not None else ""
    whom = f" waiting for {ranks_words(waited)}" if waited else " in a collective"
    text = f"{ranks_words(said)} timed out in the NCCL watchdog{after}{whom}"
    strength = Strength.RAS_BEHIND if waited else Strength.CONTEXT  # who, not where
    finding = Finding(text, strength, "lastwords", ranks=tuple(waited), pids=pids)
    return finding, {"timed_out": said, "after_s": secs, "waited_for": waited, "pids": list(pids)}


def watchdog_finding(
    entries: Sequence[tuple[dict[str, Any], Words]],
) -> tuple[Finding, dict[str, Any]] | None:
    """One finding for the ranks the watchdog ended, and check --json's `watchdog` object:
    {ended, after_s, waited_for, pids}; None when the watchdog ended no rank. Where none is
    gone yet, the live ranks it timed out (live_timeouts)."""
    victims = [(e, w) for e, w in entries if is_victim(e, w) and isinstance(e.get("rank"), int)]
    if not victims:
        return live_timeouts(entries)
    ended = sorted({e["rank"] for e, _ in victims})
    secs = None
    for e, _ in victims:
        tail = e.get("tail")
        secs = after_s(tail[-65536:]) if isinstance(tail, str) else None
        if secs is not None:
            break
    waited = [
        e
        for e, _ in entries
        if not e.get("gone") and isinstance(e.get("rank"), int) and e["rank"] not in ended
    ]
    waited_ranks = sorted({e["rank"] for e in waited})
    pids = tuple(e["pid"] for e in waited if isinstance(e.get("pid"), int))
    verb = "was" if len(ended) == 1 else "were"
    after = f" after {secs:g} s" if secs is not None else ""
    if waited_ranks:
        text = (
            f"{ranks_words(ended)} {verb} ended by the NCCL watchdog{after} waiting for "
            f"{ranks_words(waited_ranks)}"
        )
        strength = Strength.RAS_BEHIND  # who, not where: a culprit's line still leads
    else:
        text = (
            f"{ranks_words(ended)} {verb} ended by the NCCL watchdog{after} waiting in a collective"
        )
        strength = Strength.CONTEXT
    finding = Finding(
        text, strength, "lastwords", ranks=tuple(waited_ranks), pids=pids if waited_ranks else ()
    )
    extra = {"ended": ended, "after_s": secs, "waited_for": waited_ranks, "pids": list(pids)}
    return finding, extra
