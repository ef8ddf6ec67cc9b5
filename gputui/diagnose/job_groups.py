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

A history file of readings alone (nvidia-smi's CSV: Snapshot.readings_only) lists no
process at all, so no job can be told from another: the node's GPUs in use (a kernel, memory
traffic, or a context's memory: `in_use`) form one group, as when environments cannot be
read, and a GPU that went quiet while its peers spun is the suspect (the verdict says the
grouping was assumed: gputui.diagnose.hang.detector). A GPU never in use is no member.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from gputui.collect.model import GpuSample, Job, ProcessInfo, Snapshot

MAX_DEPARTED = 64  # departed pids remembered per job: bounded, whatever churns
NODE_KEY = "~unclaimed"  # all GPUs with processes, when jobs cannot be told apart
READINGS_KEY = "~readings"  # all GPUs in use, when the file lists no process at all
# A GPU in use, read from its readings alone: a kernel or memory traffic (the detector's idle
# thresholds, gputui.diagnose.hang.classify), or memory held (a CUDA context holds some
# 500 MiB; a GPU no process holds reads a few MiB)
IN_USE_UTIL, IN_USE_MEM_UTIL, IN_USE_MEM_MB = 10.0, 5.0, 256.0
# What _plans reads of each GPU and each process, as one tuple each (made in C: every sample)
_GPU_INPUTS = attrgetter("index", "pids")
_PROCESS_INPUTS = attrgetter("pid", "rank")


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
    # The plan whose departures were noted last (GroupMemory._apply): the same plan again
    # (nothing but forget_before, which only deletes, touched the group since) changes
    # nothing, so it is not noted again. Two jobs of one key overwrite it in turn.
    noted: _JobPlan | None = field(default=None, repr=False, compare=False)

    def present(self, snap: Snapshot) -> tuple[int, ...]:
        """GPUs where one of this group's processes is now."""
        t = snap.t
        return tuple(sorted([i for i, m in self.members.items() if m.last_seen == t]))

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
        self, now: frozenset[int], fresh: tuple[tuple[int, tuple[int | None, int]], ...], t: float
    ) -> None:
        """Remember pids of this job that held a GPU and are gone from the job now. Only
        GPU holders count: a data-loader worker that inherits RANK is no rank. `now`: the
        job's pids; `fresh`: (pid, (rank or None, GPU)) of those on a GPU now (_JobPlan)."""
        for pid in [p for p in self.ranks if p not in now and p not in self.departed]:
            if len(self.departed) < MAX_DEPARTED:
                self.departed[pid] = (t, *self.ranks[pid])
        for pid in now:
            self.departed.pop(pid, None)  # back (a pid seen again is not gone)
        for pid, held in fresh:
            self.ranks[pid] = held
        self.ranks = {p: r for p, r in self.ranks.items() if p in now}


@dataclass(frozen=True)
class _JobPlan:
    """What one sample says of one job, before the group's memory is folded in: a pure
    function of the job, the GPUs' pid lists and the processes' ranks (`_inputs`), so a
    sample whose inputs equal the last one's reuses it (most samples: the same ranks on
    the same GPUs) and only the fold (`GroupMemory._apply`) runs again."""

    job: Job
    now: frozenset[int]  # the job's pids
    fresh: tuple[tuple[int, tuple[int | None, int]], ...]  # pid -> (rank, GPU), on a GPU now
    members: tuple[tuple[int, tuple[int, ...], int | None], ...]  # GPU, its pids, its rank
    missing: tuple[int, ...]  # GPUs where a never-seen local rank is placed (if free)


class GroupMemory:
    """Folds snapshots into groups. Not thread-safe: one Detector, one thread."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}
        # The last sample's inputs and what they gave (see _JobPlan): equal inputs (the
        # same jobs, pid lists and ranks; the reader even hands back the same objects)
        # give the same plans, so they are made once, not at every sample.
        self._inputs: tuple[object, ...] | None = None
        self._plans: tuple[tuple[_JobPlan, ...], tuple[tuple[int, tuple[int, ...]], ...]] = ((), ())

    def settled(self, t: float) -> bool:
        """Every member of every group seen at `t` (the last sample), none inferred and no
        departed pid: a sample with the same GPUs and pids only moves their last_seen
        (a replay's quiet step)."""
        for g in self.groups.values():
            if g.departed:
                return False
            for m in g.members.values():
                if m.last_seen != t or m.missing_rank is not None:
                    return False
        return True

    def seen_at(self, t: float) -> None:
        """A quiet sample at `t`: every member seen again, as update() would note it."""
        for g in self.groups.values():
            for m in g.members.values():
                m.last_seen = t

    def update(self, snap: Snapshot) -> list[Group]:
        """The groups at this sample, largest first. O(processes + GPUs)."""
        if snap.readings_only and not snap.processes:
            used = tuple((g.index, ()) for g in snap.gpus if in_use(g))
            return self._apply(snap.t, (), used, READINGS_KEY)
        inputs = _inputs(snap)
        if inputs != self._inputs:
            self._plans = _plans(snap)
            self._inputs = inputs
        return self._apply(snap.t, *self._plans)

    def _apply(
        self,
        t: float,
        plans: tuple[_JobPlan, ...],
        loose: tuple[tuple[int, tuple[int, ...]], ...],
        loose_key: str = NODE_KEY,
    ) -> list[Group]:
        """Fold this sample's plans into the groups remembered; `loose` (GPU, pids) into
        one group of `loose_key`."""
        seen: dict[str, Group] = {}
        for plan in plans:
            job = plan.job
            g = self.groups.get(job.key) or Group(job.key, job.label)
            g.label = job.label
            # The same plan noted at the last sample: noting it again changes nothing
            if g.noted is not plan:
                g.note_departures(plan.now, plan.fresh, t)
                g.noted = plan
            members = g.members
            for gpu, pids, rank in plan.members:
                m = members.get(gpu)
                if m is not None and m.pids is pids and m.rank == rank and m.missing_rank is None:
                    m.last_seen = t  # the same process seen again: no new Member to make
                else:
                    members[gpu] = Member(pids, t, rank=rank)
            _place_missing(g, plan.missing)
            seen[job.key] = g
        # GPUs with processes that no job claims: one node-wide group, as when
        # environments cannot be read.
        if loose:
            g = self.groups.get(loose_key) or Group(loose_key, None)
            for index, pids in loose:
                g.members[index] = Member(pids, t)
            seen[loose_key] = g
        self.groups = seen
        return sorted(seen.values(), key=lambda g: -len(g.members))


def in_use(g: GpuSample) -> bool:
    """Whether a GPU's readings say something runs on it (for files that list no process)."""
    return (
        (g.util is not None and g.util >= IN_USE_UTIL)
        or (g.mem_util is not None and g.mem_util >= IN_USE_MEM_UTIL)
        or (g.mem_used_mb is not None and g.mem_used_mb >= IN_USE_MEM_MB)
    )


def _inputs(snap: Snapshot) -> tuple[object, ...]:
    """Everything _plans reads of a snapshot, for an equality test: the jobs, each GPU's
    pids, and each process's rank (only read when there are jobs). Tuples compare their
    items by identity first, so the reader's shared objects make this cheap."""
    gpus = tuple(map(_GPU_INPUTS, snap.gpus))
    if not snap.jobs:
        return ((), gpus, ())
    return (snap.jobs, gpus, tuple(map(_PROCESS_INPUTS, snap.processes)))


def _plans(
    snap: Snapshot,
) -> tuple[tuple[_JobPlan, ...], tuple[tuple[int, tuple[int, ...]], ...]]:
    """Each job's plan, and the GPUs with processes that no job claims (index, pids)."""
    on_gpu = {g.index: set(g.pids) for g in snap.gpus}
    procs = {p.pid: p for p in snap.processes} if snap.jobs else {}
    gpu_of = {p: g.index for g in snap.gpus for p in g.pids}
    indices = set(on_gpu)
    plans = []
    in_jobs: set[int] = set()
    for job in snap.jobs:
        now = frozenset(job.pids)
        fresh = tuple(
            (pid, (_rank_of(procs.get(pid)), gpu_of[pid])) for pid in now if pid in gpu_of
        )
        members = []
        for gpu in job.gpus:
            there = on_gpu.get(gpu, set())
            here = tuple(p for p in job.pids if p in there)
            ranks = [r.rank for p in here if (r := getattr(procs.get(p), "rank", None))]
            rank = ranks[0] if len(ranks) == 1 else None
            members.append((gpu, here or tuple(sorted(job.pids)), rank))
            in_jobs.add(gpu)
        missing = _missing_ranks(job, gpu_of, procs, indices)
        plans.append(_JobPlan(job, now, fresh, tuple(members), missing))
    loose = tuple((g.index, g.pids) for g in snap.gpus if g.pids and g.index not in in_jobs)
    return tuple(plans), loose


def _rank_of(p: ProcessInfo | None) -> int | None:
    return p.rank.rank if p is not None and p.rank is not None else None


def _place_missing(group: Group, missing: tuple[int, ...]) -> None:
    """Replace the group's inferred members by a never-seen member on each GPU of `missing`
    that no member holds (see _missing_ranks)."""
    members = group.members
    for i in [i for i, m in members.items() if m.missing_rank is not None]:
        del members[i]
    for lr in missing:
        if lr not in members:
            members[lr] = Member((), float("-inf"), missing_rank=lr)


def _missing_ranks(
    job: Job, gpu_of: dict[int, int], procs: dict[int, ProcessInfo], gpus: set[int]
) -> tuple[int, ...]:
    """The GPUs where a local rank the job should have but does not would sit (placed there
    unless a member of the group holds it: _place_missing).

    Only when the convention local rank == GPU index holds for every rank that is here, so
    a job that maps ranks to GPUs some other way is never given a wrong GPU.
    """
    local: dict[int, int] = {}  # local rank -> GPU
    sizes: set[int] = set()
    for pid in job.pids:
        proc = procs.get(pid)
        r = proc.rank if proc else None
        if r is None or r.local_rank is None or r.local_world_size is None:
            continue
        gpu = gpu_of.get(pid)
        if gpu is not None and gpu != r.local_rank:
            return ()  # ranks are mapped to GPUs some other way: infer nothing
        if gpu is not None:
            local[r.local_rank] = gpu
        sizes.add(r.local_world_size)
    if len(sizes) != 1 or not local:
        return ()
    size = sizes.pop()
    # A missing local rank r sits on GPU r, so only GPUs of this node can be one: walk them,
    # never range(LOCAL_WORLD_SIZE), whose value comes from a process's environment (or a
    # recording) and could be anything.
    return tuple(lr for lr in sorted(gpus) if lr < size and lr not in local)
