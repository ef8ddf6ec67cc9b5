"""Which job a verdict is about, and what its gatherers are pointed at.

Why apart: the Watcher calls a stall on GPUs, but evidence is taken from processes. These
pure functions turn a verdict and its snapshot into the job (its key names its records, so a
replay finds them) and into a `JobTarget`: the live local ranks to dump, the ranks already
gone (named by the process last seen on their GPU: `LastSeen`, since NVML lists nothing on
the GPU of a rank that exited), and the Xids that may name a rank that died before it was
seen.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gputui.collect.model import Job, ProcessInfo, Snapshot
from gputui.diagnose.verdict import OK, Verdict
from gputui.watch.gatherers import JobTarget

if TYPE_CHECKING:
    from gputui.collect.procs.rank_tracker import RankIOTracker
    from gputui.diagnose.evidence import Evidence

__all__ = ["LastSeen", "busy_by_ras", "gone_target", "job_of", "target_of"]

EXITED = "its process exited before the dump"


def job_of(v: Verdict, snap: Snapshot) -> Job | None:
    """The job the verdict is about: by its label, else the job on its spinning GPUs; a
    node-wide group (environments unreadable) when no job claims them."""
    gpus = set(v.spinning)
    for job in snap.jobs:  # a dead rank's job may not spin yet (gputui.watch.deaths)
        if job.label == v.job and (gpus & set(job.gpus) or not gpus):
            return job
    for job in snap.jobs:
        if gpus & set(job.gpus):
            return job
    on = set(v.spinning) | set(v.suspects)
    pids = tuple(sorted({p for g in snap.gpus if g.index in on for p in g.pids}))
    return Job(key="~node", label=v.job or "node", pids=pids, gpus=tuple(sorted(on)))


def target_of(
    v: Verdict,
    snap: Snapshot,
    job: Job,
    seen: Mapping[int, ProcessInfo],
    rankio: RankIOTracker | None,
    xids: tuple[Any, ...],
) -> JobTarget:
    """The gatherers' target for `job`: its live local ranks, and a `gone` stack for each
    vanished GPU whose last process (`seen`: GPU -> process) is no longer here.

    `xids`: the Xids the kernel and NVML reported (from before gputui started too): one
    names the pid of a rank that died before it was seen (gputui.tools.gather.late_words).
    """
    from gputui.collect.frames import RankStack

    procs = {p.pid: p for p in snap.processes}
    ranks = tuple(procs[p] for p in job.pids if p in procs and procs[p].live)
    gone = []
    for gpu in v.vanished:
        last = seen.get(gpu)
        if last is not None and last.pid in procs:
            continue  # still alive (it left the GPU, not the node): dumped with the others
        r = last.rank.rank if last is not None and last.rank is not None else None
        pid = last.pid if last is not None else None
        gone.append(RankStack(pid, r, gpu, "gone", error=EXITED))
    return JobTarget(job.key, job.label, v.state, v, ranks, tuple(gone), rankio, xids=xids)


def gone_target(
    v: Verdict,
    job: Job,
    members: Sequence[Any],
    rankio: RankIOTracker | None,
    xids: tuple[Any, ...],
) -> JobTarget:
    """The target of a job whose ranks (`members`) have all gone at once: nothing live."""
    from gputui.collect.frames import RankStack

    gone = tuple(RankStack(m.pid, m.rank, m.gpu, "gone", error=EXITED) for m in members)
    return JobTarget(job.key, job.label, v.state, v, (), gone, rankio, xids=xids)


def busy_by_ras(v: Verdict, evidence: list[Evidence]) -> Verdict | None:
    """An ok verdict when NCCL RAS shows the job's collectives advancing between two answers
    and names no rank behind and no mismatch: a job that only communicates (an all_reduce
    benchmark, a parameter server) spins to NVML's eyes, but it is busy, not stalled."""
    for e in evidence:
        x = e.extra if e.kind == "ras" else {}
        if not x.get("progress") or x.get("mismatch") or x.get("behind") or x.get("missing"):
            continue
        # One steady sentence: the counts change every answer, and a new `check --json`
        # line every 3 s for a healthy job would be noise (they are under "nccl" in JSON).
        return replace(
            v,
            state=OK,
            reason=(
                "busy, not stalled: NCCL RAS shows its collectives advancing (a job that only "
                "communicates looks like a hang to NVML)"
            ),
            suspects=(),
            suspect_pids=(),
            next_steps=(),
            findings=(),
            evidence={"ras": x},
        )
    return None


class LastSeen:
    """job key -> GPU index -> the process last seen on it."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[int, ProcessInfo]] = {}

    def of(self, key: str) -> dict[int, ProcessInfo] | None:
        """The GPUs' last processes of job `key`; None when it was never seen."""
        return self._seen.get(key)

    def remember(self, snap: Snapshot, alarmed: Container[str]) -> None:
        """Note `snap`'s processes; forget the jobs neither listed now nor in `alarmed`."""
        if not snap.jobs and not self._seen:
            return  # no job now, none remembered: nothing to do (a host with no GPU job)
        procs = {p.pid: p for p in snap.processes}
        keys = set()
        for job in snap.jobs:
            keys.add(job.key)
            seen = self._seen.setdefault(job.key, {})
            for pid in job.pids:
                p = procs.get(pid)
                if p is None:
                    continue
                for g in p.gpus:
                    seen[g] = p
        if len(self._seen) > len(keys):  # a job remembered that is not here now
            for key in [k for k in self._seen if k not in keys and k not in alarmed]:
                del self._seen[key]
