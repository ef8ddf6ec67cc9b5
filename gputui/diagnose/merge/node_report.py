"""The keys a node's `check --json` line carries so that `gputui merge` can join many nodes.

A job that spans nodes is judged from every node's lines at once (gputui/diagnose/merge/join.py).
For that each line says which node it is (`host`), which job it is about (`job_key`, e.g.
`master:10.0.0.1:29500`: the same on every node of one torchrun job), the job's
`world_size`, and `ranks`: GPU index -> global rank for the GPUs of that job on this node.

On a stalled line, `ranks` covers the stalled job's spinning and suspect GPUs, including a
GPU whose rank has exited (remembered from earlier samples). On an ok line it covers the
GPUs of the largest job that has ranks here: a node whose rank sits idle on the CPU reports
"ok" (nothing spins there), and it is exactly this line that lets the merge name that GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from gputui.collect.model import Snapshot
from gputui.diagnose.verdict import Verdict

# What update() reads of each process, as one tuple (attrgetter: made in C, every sample)
_PROCESS_INPUTS = attrgetter("pid", "rank", "gpus")


@dataclass(frozen=True)
class _Seen:
    rank: int
    job_key: str
    world_size: int | None


class NodeReport:
    """Follows the snapshots of one node; `keys(verdict, snap)` gives the extra keys."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.seen: dict[int, _Seen] = {}  # GPU -> the rank last seen on it
        # What the last update read (the jobs, each process's pid, rank and GPUs): an
        # update from equal inputs writes the same values again, so it is skipped.
        self._inputs: tuple[object, ...] | None = None
        self._version = 0  # bumped when `seen` changes
        # The ok line's keys at (jobs, version): an ok line's keys read nothing else.
        self._ok: tuple[tuple[object, ...], tuple[str | None, int | None, dict[str, int]]] | None
        self._ok = None

    def update(self, snap: Snapshot) -> None:
        if not snap.jobs:
            return
        inputs = (snap.jobs, tuple(map(_PROCESS_INPUTS, snap.processes)))
        if inputs == self._inputs:
            return  # the same writes, in the same order, as last time: nothing would change
        self._inputs = inputs
        # snap.process(pid) is a scan per pid; reversed: the first of a pid wins, as there
        procs = {p.pid: p for p in reversed(snap.processes)}
        for job in snap.jobs:
            for pid in job.pids:
                p = procs.get(pid)
                if p is None or p.rank is None or p.rank.rank is None:
                    continue
                now = (p.rank.rank, job.key, job.world_size)
                for g in p.gpus:
                    old = self.seen.get(g)  # the same as last sample, mostly: kept as it is
                    if old is None or (old.rank, old.job_key, old.world_size) != now:
                        self.seen[g] = _Seen(*now)
                        self._version += 1

    def keys(self, v: Verdict, snap: Snapshot) -> dict[str, Any]:
        job_key: str | None = None
        world: int | None = None
        ranks: dict[str, int] = {}
        rdzv = v.evidence.get("rendezvous") if v.alarm else None
        if isinstance(rdzv, dict) and rdzv.get("jobs"):  # ranks that hold no GPU yet
            first = rdzv["jobs"][0]
            job_key, world = first.get("job"), first.get("world")
        elif v.alarm:
            gpus = (*v.spinning, *v.suspects)
            known = [self.seen[g] for g in gpus if g in self.seen]
            if known:
                job_key, world = known[0].job_key, known[0].world_size
                for g in sorted(gpus):
                    s = self.seen.get(g)
                    if s is not None and s.job_key == job_key:
                        ranks[str(g)] = s.rank
        else:
            job_key, world, ranks = self._ok_keys(snap)
            ranks = dict(ranks)  # the caller's own: the cached one stays as it is
        return {"host": self.host, "job_key": job_key, "world_size": world, "ranks": ranks}

    def _ok_keys(self, snap: Snapshot) -> tuple[str | None, int | None, dict[str, int]]:
        """An ok line's job key, world size and ranks: those of the largest job with ranks
        here. They depend on the jobs and on `seen` only, so they are worked out again when
        either changed (a job key or rank changes once in a long run; `check` asks at
        every sample)."""
        at = (snap.jobs, self._version)
        if self._ok is not None and self._ok[0] == at:
            return self._ok[1]
        found: tuple[str | None, int | None, dict[str, int]] = (None, None, {})
        for job in snap.jobs:  # largest first
            here = {g: self.seen[g] for g in job.gpus if g in self.seen}
            here = {g: s for g, s in here.items() if s.job_key == job.key}
            if here:
                found = (job.key, job.world_size, {str(g): s.rank for g, s in sorted(here.items())})
                break
        self._ok = (at, found)
        return found
