"""Which GPUs belong to which job, remembered across samples so a dead rank still counts.

NVML forgets a GPU's process the moment it exits. In the hang where a rank dies, that GPU
is exactly the one to name, so each job's GPUs and pids are remembered while the job still
has a process on the node: through a whole stall, and otherwise for a window (the detector
uses hang_after) after the GPU was last seen, so a rank that left long before anything
stalled is not blamed. A job that has gone entirely is forgotten at once: a new job on the
same GPUs starts clean.

A rank that died before gputui started was never seen. When the job's surviving processes
say how many local ranks there should be (LOCAL_WORLD_SIZE) and each sits on the GPU whose
index is its LOCAL_RANK (the usual `torch.cuda.set_device(local_rank)`), a missing local
rank is placed on the GPU of the same index and named, marked as inferred.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputui.collect.model import Job, ProcessInfo, Snapshot

MAX_DEPARTED = 64  # departed pids remembered per job: bounded, whatever churns
NODE_KEY = "~unclaimed"  # all GPUs with processes, when jobs cannot be told apart


@dataclass
class Member:
    """A GPU of a job: the pids last seen on it, and when."""

    pids: tuple[int, ...]
    last_seen: float
    missing_rank: int | None = None  # inferred: this local rank has no process on the node
    rank: int | None = None  # the global rank of its process, as last seen


@dataclass
class Group:
    """A job as the detector follows it: its label and every GPU it has used."""

    key: str
    label: str | None
    members: dict[int, Member] = field(default_factory=dict)
    # Processes of the job that left while a GPU of theirs stayed in use by another rank
    # (ranks sharing a GPU): pid -> (when noticed, its rank or None, its GPU). A member GPU tells
    # a rank that died alone on its GPU; this tells one that died beside a waiting rank.
    departed: dict[int, tuple[float, int | None, int]] = field(default_factory=dict)
    # pid -> (rank or None, GPU) of each GPU-holding process of the job, as last seen
    ranks: dict[int, tuple[int | None, int]] = field(default_factory=dict)

    def present(self, snap: Snapshot) -> tuple[int, ...]:
        """GPUs where one of this group's processes is now."""
        return tuple(sorted(i for i, m in self.members.items() if m.last_seen == snap.t))

    def vanished(self, snap: Snapshot) -> tuple[int, ...]:
        """GPUs this job used whose process is no longer there."""
        return tuple(sorted(i for i, m in self.members.items() if m.last_seen < snap.t))

    def forget_before(self, t: float) -> None:
        """Drop GPUs whose process was last seen before `t` (called while not stalled)."""
        for i in [i for i, m in self.members.items() if m.last_seen < t]:
            del self.members[i]
        for pid in [p for p, (when, _, _) in self.departed.items() if when < t]:
            del self.departed[pid]

    def note_departures(
        self, job: Job, snap: Snapshot, procs: dict[int, ProcessInfo], gpu_of: dict[int, int]
    ) -> None:
        """Remember pids of this job that held a GPU and are gone from the job now. Only
        GPU holders count: a data-loader worker that inherits RANK is no rank."""
        now = set(job.pids)
        for pid in [p for p in self.ranks if p not in now and p not in self.departed]:
            if len(self.departed) < MAX_DEPARTED:
                self.departed[pid] = (snap.t, *self.ranks[pid])
        for pid in now:
            self.departed.pop(pid, None)  # back (a pid seen again is not gone)
            if pid in gpu_of:
                p = procs.get(pid)
                rank = p.rank.rank if p is not None and p.rank is not None else None
                self.ranks[pid] = (rank, gpu_of[pid])
        self.ranks = {p: r for p, r in self.ranks.items() if p in now}


class GroupMemory:
    """Folds snapshots into groups. Not thread-safe: one Detector, one thread."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}

    def update(self, snap: Snapshot) -> list[Group]:
        """The groups at this sample, largest first. O(processes + GPUs)."""
        on_gpu = {g.index: set(g.pids) for g in snap.gpus}
        procs = {p.pid: p for p in snap.processes} if snap.jobs else {}
        gpu_of = {p: g.index for g in snap.gpus for p in g.pids}
        indices = set(on_gpu)
        seen: dict[str, Group] = {}
        in_jobs: set[int] = set()
        for job in snap.jobs:
            g = self.groups.get(job.key) or Group(job.key, job.label)
            g.label = job.label
            g.note_departures(job, snap, procs, gpu_of)
            for gpu in job.gpus:
                there = on_gpu.get(gpu, set())
                here = tuple(p for p in job.pids if p in there)
                ranks = [r.rank for p in here if (r := getattr(procs.get(p), "rank", None))]
                rank = ranks[0] if len(ranks) == 1 else None
                g.members[gpu] = Member(here or tuple(sorted(job.pids)), snap.t, rank=rank)
                in_jobs.add(gpu)
            _infer_missing_ranks(g, job, gpu_of, procs, indices)
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
        return sorted(seen.values(), key=lambda g: -len(g.members))


def _infer_missing_ranks(
    group: Group, job: Job, gpu_of: dict[int, int], procs: dict[int, ProcessInfo], gpus: set[int]
) -> None:
    """Add a never-seen member for each local rank the job should have but does not.

    Only when the convention local rank == GPU index holds for every rank that is here, so
    a job that maps ranks to GPUs some other way is never given a wrong GPU.
    """
    for i in [i for i, m in group.members.items() if m.missing_rank is not None]:
        del group.members[i]
    local: dict[int, int] = {}  # local rank -> GPU
    sizes: set[int] = set()
    for pid in job.pids:
        proc = procs.get(pid)
        r = proc.rank if proc else None
        if r is None or r.local_rank is None or r.local_world_size is None:
            continue
        gpu = gpu_of.get(pid)
        if gpu is not None and gpu != r.local_rank:
            return  # ranks are mapped to GPUs some other way: infer nothing
        if gpu is not None:
            local[r.local_rank] = gpu
        sizes.add(r.local_world_size)
    if len(sizes) != 1 or not local:
        return
    size = sizes.pop()
    # A missing local rank r sits on GPU r, so only GPUs of this node can be one: walk them,
    # never range(LOCAL_WORLD_SIZE), whose value comes from a process's environment (or a
    # recording) and could be anything.
    for lr in sorted(gpus):
        if lr < size and lr not in local and lr not in group.members:
            group.members[lr] = Member((), float("-inf"), missing_rank=lr)
