"""Which GPUs belong to which job, remembered across samples so a dead rank still counts.

NVML forgets a GPU's process the moment it exits. In the hang where a rank dies, that GPU
is exactly the one to name, so each job's GPUs and pids are remembered for as long as the
job still has a process on the node. A job that has gone entirely is forgotten at once: a
new job on the same GPUs starts clean.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputui.collect.model import Snapshot

NODE_KEY = "~unclaimed"  # all GPUs with processes, when jobs cannot be told apart


@dataclass
class Member:
    """A GPU of a job: the pids last seen on it, and when."""

    pids: tuple[int, ...]
    last_seen: float


@dataclass
class Group:
    """A job as the detector follows it: its label and every GPU it has used."""

    key: str
    label: str | None
    members: dict[int, Member] = field(default_factory=dict)

    def present(self, snap: Snapshot) -> tuple[int, ...]:
        """GPUs where one of this group's processes is now."""
        return tuple(sorted(i for i, m in self.members.items() if m.last_seen == snap.t))

    def vanished(self, snap: Snapshot) -> tuple[int, ...]:
        """GPUs this job used whose process is no longer there."""
        return tuple(sorted(i for i, m in self.members.items() if m.last_seen < snap.t))


class GroupMemory:
    """Folds snapshots into groups. Not thread-safe: one Detector, one thread."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}

    def update(self, snap: Snapshot) -> list[Group]:
        seen: dict[str, Group] = {}
        in_jobs: set[int] = set()
        for job in snap.jobs:
            g = self.groups.get(job.key) or Group(job.key, job.label)
            g.label = job.label
            pids = set(job.pids)
            for gpu in job.gpus:
                on_gpu = snap.gpu(gpu)
                here = tuple(p for p in (on_gpu.pids if on_gpu else ()) if p in pids)
                g.members[gpu] = Member(here or tuple(sorted(pids)), snap.t)
                in_jobs.add(gpu)
            seen[job.key] = g
        # GPUs with processes that no job claims: one node-wide group, as when
        # environments cannot be read.
        loose = [g for g in snap.gpus if g.pids and g.index not in in_jobs]
        if loose:
            g = self.groups.get(NODE_KEY) or Group(NODE_KEY, None)
            for gs in loose:
                g.members[gs.index] = Member(gs.pids, snap.t)
            seen[NODE_KEY] = g
        self.groups = seen
        return list(seen.values())
