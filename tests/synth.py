"""Build synthetic sample sequences for the hang detector's edge cases.

Each GPU state is given as a word; the readings come from the measured H200 reference points
of tests/data/h200x2-trace.jsonl.gz (as fractions of the power limit, so a 400 W card gets
400 W figures).
Processes carry rank variables, so jobs are grouped exactly as on a live node.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from gputui.collect.model import GpuSample, ProcessInfo, RankInfo, Snapshot
from gputui.collect.procs.jobs import group_jobs

# state word -> (util %, mem_util %, power as a fraction of the limit, has a process)
READINGS = {
    "free": (0.0, 0.0, 0.11, False),
    "idle": (0.0, 0.0, 0.17, True),
    "spin": (100.0, 0.0, 0.18, True),
    "comm": (97.0, 35.0, 0.41, True),
    "compute": (98.0, 23.0, 0.98, True),
    "slow_peer": (99.0, 2.0, 0.28, True),  # waits on a slow rank, but collectives complete
    "gone": (0.0, 0.0, 0.11, False),  # the process exited
    # A rank waiting for a peer with 4x its work (4 x H200 recording): collectives complete.
    "wait_4x": (98.0, 8.0, 0.46, True),
    # A rank waiting on a peer only 20 % slower: NVML's averaging reads it as busy.
    "wait_mild": (98.0, 19.0, 0.85, True),
    # Ranks waiting for a peer with 2.5x their work (4 x H200, one rank per GPU): 411 W, and
    # one at 434 W (62 % of its limit), over the old fixed cut of 60 %; the straggler 693 W.
    "wait_2_5x": (98.0, 12.0, 0.59, True),
    "wait_2_5x_warm": (98.0, 12.0, 0.62, True),
}
DT = 0.25  # seconds between samples, as in the calibration trace


def gpu(
    index: int, state: str, *, limit: float | None = 700.0, power: bool = True, pid: int = 0
) -> GpuSample:
    util, mem, frac, has_proc = READINGS[state]
    return GpuSample(
        index=index,
        name="NVIDIA H200" if limit == 700.0 else "NVIDIA A100",
        util=util,
        mem_util=mem,
        power_w=frac * (limit or 700.0) if power else None,
        power_limit_w=limit if power else None,
        pids=(pid or 1000 + index,) if has_proc else (),
    )


def snapshot(
    t: float,
    states: Sequence[str],
    *,
    jobs: Sequence[Sequence[int]] | None = None,
    limits: Sequence[float | None] | None = None,
    no_power: Sequence[int] = (),
    local: bool = False,
) -> Snapshot:
    """GPU i in states[i]; `jobs` lists the GPU indices of each job (default: one job of all),
    rank k on the k-th GPU listed. `local` adds LOCAL_RANK (= rank) and LOCAL_WORLD_SIZE, as
    torchrun sets them on a single node."""
    gpus = tuple(
        gpu(i, s, limit=(limits[i] if limits else 700.0), power=i not in no_power)
        for i, s in enumerate(states)
    )
    jobs = jobs if jobs is not None else [list(range(len(states)))]
    procs = []
    for j, members in enumerate(jobs):
        for rank, i in enumerate(members):
            if not gpus[i].pids:
                continue
            procs.append(
                ProcessInfo(
                    pid=gpus[i].pids[0],
                    cmdline=("python", "train.py"),
                    gpus=(i,),
                    rank=RankInfo(
                        rank=rank,
                        world_size=len(members),
                        local_rank=rank if local else None,
                        local_world_size=len(members) if local else None,
                        master=f"h:{29500 + j}",
                    ),
                    live=False,
                )
            )
    return Snapshot(t=t, gpus=gpus, processes=tuple(procs), jobs=group_jobs(procs), source="replay")


def timeline(
    *segments: tuple[float, Sequence[str]], t0: float = 1000.0, **kw
) -> Iterator[Snapshot]:
    """Samples every DT seconds: each segment is (seconds, per-GPU states)."""
    t = t0
    for seconds, states in segments:
        for _ in range(round(seconds / DT)):
            yield snapshot(t, states, **kw)
            t += DT


def with_gpu(snaps: Iterable[Snapshot], index: int, **changes: Any) -> Iterator[Snapshot]:
    """The same samples with GPU `index`'s readings changed (e.g. power_w=120.0, pids=(7,))."""
    for s in snaps:
        gpus = tuple(replace(g, **changes) if g.index == index else g for g in s.gpus)
        yield replace(s, gpus=gpus)


def many_processes(t: float, states: Sequence[str], per_gpu: int) -> Snapshot:
    """A crowded node: one rank per GPU of one job, plus `per_gpu - 1` other processes on
    each GPU that have no rank variables (each its own one-process job)."""
    base = snapshot(t, states)
    gpus, procs = [], list(base.processes)
    for g in base.gpus:
        extra = tuple(100_000 + g.index * per_gpu + k for k in range(per_gpu - 1))
        gpus.append(replace(g, pids=g.pids + extra))
        procs += [
            ProcessInfo(pid=p, cmdline=("python", "notebook.py"), gpus=(g.index,), live=False)
            for p in extra
        ]
    return replace(base, gpus=tuple(gpus), processes=tuple(procs), jobs=group_jobs(procs))


def with_real_pids(
    t: float, pids: Sequence[int | None], states: Sequence[str], master: str = "h:1"
) -> Snapshot:
    """GPU r in states[r], holding the REAL process pids[r] as rank r (its create time read
    from the host, so the tools' identity check passes); None or "gone"/"free": no process.
    How the tests put live processes that stand in for ranks behind synthetic GPU readings."""
    import psutil

    n = len(pids)
    gpus, procs = [], []
    for r, (pid, state) in enumerate(zip(pids, states, strict=True)):
        gpus.append(gpu(r, state, pid=pid or 0))
        if pid is None or state in ("gone", "free"):
            continue
        rank = RankInfo(rank=r, local_rank=r, world_size=n, local_world_size=n, master=master)
        created = psutil.Process(pid).create_time()
        procs.append(
            ProcessInfo(pid=pid, create_time=created, cmdline=("python",), gpus=(r,), rank=rank)
        )
    return Snapshot(t=t, gpus=tuple(gpus), processes=tuple(procs), jobs=group_jobs(procs))
