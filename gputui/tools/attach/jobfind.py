"""Find the other ranks of a process's job.

First from a GPU snapshot (the jobs gputui.collect groups from NVML's processes); when the
process is in no job there (no GPU on this machine, NVML not seeing it, another PID
namespace), from the host itself: processes with the same TORCHELASTIC_RUN_ID or
MASTER_ADDR:MASTER_PORT and a RANK of their own, or, for a ranked process with neither,
its siblings under the same parent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from gputui.collect.model import ProcessInfo, Snapshot
from gputui.collect.procs.jobs import rank_from_env


@dataclass(frozen=True)
class JobMembers:
    pids: tuple[int, ...]  # in rank order
    ranks: dict[int, int | None]
    how: str  # said to the user: how the ranks were found
    processes: tuple[ProcessInfo, ...] = ()  # from the snapshot, when it came from one


def _rank(env: dict[str, str]) -> int | None:
    r = rank_from_env(env)
    return r.rank if r is not None else None


def job_from_snapshot(snap: Snapshot, pid: int) -> JobMembers | None:
    for job in snap.jobs:
        if pid in job.pids and (len(job.pids) > 1 or job.key != "node"):
            procs = tuple(p for p in (snap.process(q) for q in job.pids) if p is not None)
            ranks = {p.pid: (p.rank.rank if p.rank else None) for p in procs}
            return JobMembers(job.pids, ranks, f"{job.label}: {job.how}", procs)
    return None


def _environ(pid: int) -> dict[str, str] | None:
    try:
        return psutil.Process(pid).environ()
    except psutil.Error:
        return None


def job_from_host(pid: int) -> JobMembers:
    """The job of `pid` from the host's processes (psutil), without any GPU."""
    env = _environ(pid)
    if env is None:
        return JobMembers((pid,), {pid: None}, "environment not readable: only this process")
    run_id = env.get("TORCHELASTIC_RUN_ID")
    if run_id in (None, "", "none"):
        run_id = None
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    ranked = "RANK" in env or "LOCAL_RANK" in env
    try:
        ppid = psutil.Process(pid).ppid()
    except psutil.Error:
        ppid = None

    def same(other: dict[str, str]) -> bool:
        if "RANK" not in other and "LOCAL_RANK" not in other:
            return False  # the launcher, or an unrelated process with the same exports
        if run_id is not None:
            return other.get("TORCHELASTIC_RUN_ID") == run_id
        return other.get("MASTER_ADDR") == addr and other.get("MASTER_PORT") == port

    if run_id is not None:
        how = f"same TORCHELASTIC_RUN_ID={run_id} (host processes)"
    elif addr and port:
        how = f"same MASTER_ADDR:PORT={addr}:{port} (host processes)"
    elif ranked and ppid:
        how = f"RANK set, same parent pid {ppid} (host processes)"
    else:
        return JobMembers((pid,), {pid: _rank(env)}, "no rank variables: only this process")

    skip = {os.getpid()}  # gputui run from inside a rank's shell has the same variables
    ranks: dict[int, int | None] = {pid: _rank(env)}
    for p in psutil.process_iter(["pid", "ppid"]):
        q = p.info["pid"]
        if q == pid or q in skip:
            continue
        if run_id is None and not (addr and port) and p.info["ppid"] != ppid:
            continue
        other = _environ(q)
        if other is None:
            continue
        if run_id is None and not (addr and port):
            if "RANK" in other or "LOCAL_RANK" in other:
                ranks[q] = _rank(other)
        elif same(other):
            ranks[q] = _rank(other)
    order = sorted(ranks, key=lambda q: (ranks[q] if ranks[q] is not None else 1 << 30, q))
    return JobMembers(tuple(order), ranks, how)


def find_job(pid: int, snapshot: Snapshot | None = None) -> JobMembers:
    """The job of `pid`: from `snapshot` when it holds one with pid, else from the host.

    Args:
        pid: any rank of the job.
        snapshot: the latest sample, when there is one (its jobs are already grouped).

    Returns:
        The JobMembers: pids in rank order, pid -> rank, and how they were found.
    """
    if snapshot is not None:
        found = job_from_snapshot(snapshot, pid)
        if found is not None:
            return found
    return job_from_host(pid)
