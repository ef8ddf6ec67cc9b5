"""Ending a hung job's ranks on this node (gputui/tools/attach/endjob.py), on real processes.

The "ranks" are real Python children; one ignores SIGTERM, as a rank stuck in a driver call
may. Covers: every rank gets SIGTERM and the one that ignores it gets SIGKILL after the grace
period; a process of the job without a rank, a process of another job, and a pid whose
process is no longer the one seen (create time) are never signalled and stay alive.
"""

from __future__ import annotations

import psutil

from gputui.collect.model import Job, ProcessInfo, RankInfo
from gputui.tools.attach.endjob import end_ranks, ranks_here

STUBBORN = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"


def info(child, rank: int | None, create_time: float | None = None) -> ProcessInfo:
    ct = create_time if create_time is not None else psutil.Process(child.pid).create_time()
    r = RankInfo(rank=rank, world_size=2) if rank is not None else None
    return ProcessInfo(pid=child.pid, create_time=ct, cmdline=("python",), gpus=(0,), rank=r)


def alive(child) -> bool:
    return child.poll() is None


def test_every_rank_ends_and_one_that_ignores_sigterm_gets_sigkill(spawn):
    polite, stubborn = spawn(), spawn(code=STUBBORN)
    procs = [info(polite, 0), info(stubborn, 1)]
    job = Job(key="master:h:1", label="job h:1", pids=(polite.pid, stubborn.pid), gpus=(0, 1))
    lines: list[str] = []
    res = end_ranks(job, ranks_here(job, procs), grace=0.5, on_line=lines.append)
    assert res.ok and sorted(res.ended + res.killed) == sorted([polite.pid, stubborn.pid])
    assert res.killed == [stubborn.pid]
    assert polite.wait(timeout=5) == -15  # SIGTERM was enough
    stubborn.wait(timeout=5)  # reaped already by the SIGKILL's wait: its status is gone
    assert f"pid {stubborn.pid}: still there after 0.5 s: SIGKILL" in lines


def test_a_process_that_is_not_a_rank_of_the_job_is_never_signalled(spawn):
    rank, helper, other = spawn(), spawn(), spawn()
    job = Job(key="master:h:1", label="job h:1", pids=(rank.pid, helper.pid), gpus=(0,))
    procs = [info(rank, 0), info(helper, None), info(other, 0)]
    chosen = ranks_here(job, procs)
    assert [p.pid for p in chosen] == [rank.pid]  # no rank, or another job's: not chosen
    # Handed them anyway (a bug in a caller), they are still refused.
    res = end_ranks(job, procs, grace=0.5)
    assert res.ended == [rank.pid] and not alive(rank)
    assert alive(helper) and alive(other)
    assert sorted(res.refused) == sorted(
        [
            f"pid {helper.pid}: not a rank (no RANK in its environment)",
            f"pid {other.pid}: not a process of this job",
        ]
    )


def test_a_pid_now_held_by_another_process_is_refused(spawn):
    child = spawn()
    seen = info(child, 0, create_time=psutil.Process(child.pid).create_time() - 100)
    job = Job(key="master:h:1", label="job h:1", pids=(child.pid,), gpus=(0,))
    res = end_ranks(job, [seen], grace=0.5)
    assert not res.ok and alive(child)
    assert "now belongs to another process" in res.refused[0]
