"""The NCCL watchdog's timeout in a live rank's output: the job hangs, whatever NVML reads.

The hang detector calls a job stalled once its GPUs have spun for --stall-after seconds, and
what "spin" looks like is calibrated from NVML (util, memory traffic, power). On a 4 x H200
node the waiting ranks of a real hang did not read as spinning, and `check` said nothing while
ranks 0-2 waited 20 s for rank 3 and the watchdog timed them out. The watchdog's own line,
"Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, ...) ran
for 20001 milliseconds", is proof without a clock: a collective did not complete within the
job's own timeout. The rank I/O tracker already holds each live rank's tail (refreshed every
few seconds); here, per sample, a tail that changed is read for that line, and a job with one
is called stalled at once, with the ranks that timed out and the ranks they waited for
(gputui.diagnose.gone.watchdog.live_timeouts). The Watcher then gathers as for any stall:
the stacks name the rank waited for and its line, the last words the watchdog's sentence.
"""

from __future__ import annotations

from typing import Any

from gputui.collect.model import Job, Snapshot
from gputui.diagnose.verdict import STALLED, Verdict

MARK = b"Watchdog caught collective operation timeout"
TAIL = 65536


class WatchdogSeen:
    """Per sample: a job one of whose live ranks wrote the NCCL watchdog's timeout."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int], bool] = {}  # (pid, id of its tail) -> has the mark
        self._since: dict[str, float] = {}  # job key -> when the mark was first seen

    def poll(self, snap: Snapshot, rankio: Any) -> Verdict | None:
        if rankio is None or not snap.jobs:
            return None
        found = None
        live = {p.pid: p for p in snap.processes}
        keep: dict[tuple[int, int], bool] = {}
        for job in snap.jobs:
            ios = [io for io in rankio.of_job(job.key) if io.pid in live]
            marked = []
            for io in ios:
                key = (io.pid, id(io.tail))
                has = self._seen.get(key)
                if has is None:
                    has = MARK in io.tail[-TAIL:]
                keep[key] = has
                if has:
                    marked.append(io)
            if not marked:
                self._since.pop(job.key, None)
                continue
            since = self._since.setdefault(job.key, snap.t)
            if found is None:
                found = _verdict(job, snap, ios, marked, since, live)
        self._seen = keep
        return found


def _verdict(
    job: Job, snap: Snapshot, ios: list[Any], marked: list[Any], since: float, live: dict[int, Any]
) -> Verdict:
    """The stalled verdict: the ranks without the mark are the ones waited for."""
    from gputui.diagnose.gone.explain import words_of
    from gputui.diagnose.gone.watchdog import live_timeouts

    entries = []
    for io in ios:
        text = io.tail[-TAIL:].decode("utf-8", "replace").replace("\x00", "")
        e = {"pid": io.pid, "rank": io.rank, "gone": False, "tail": text}
        entries.append((e, words_of(e)))
    said = live_timeouts(entries)
    waited = set(said[1]["waited_for"]) if said is not None else set()
    gpu = {pid: p.gpus[0] for pid, p in live.items() if p.gpus}
    by_rank = {io.rank: io.pid for io in ios}
    suspects = tuple(sorted(gpu[by_rank[r]] for r in waited if by_rank.get(r) in gpu))
    label = job.label
    text = said[0].text if said is not None else "the NCCL watchdog timed out a collective"
    return Verdict(
        t=snap.t,
        state=STALLED,
        suspects=suspects,
        suspect_pids=tuple(by_rank[r] for r in sorted(waited) if r in by_rank),
        reason=f"{'job ' + label + ': ' if label else ''}{text}",
        since=since,
        job=label,
    )
