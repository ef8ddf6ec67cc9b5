"""Job grouping from real processes' environments and parentage."""

from __future__ import annotations

from gputui.collect.model import ProcessInfo, RankInfo
from gputui.collect.procs.jobs import group_jobs, rank_from_env
from gputui.collect.procs.reader import ENV_DENIED, ProcessReader


def test_ranks_of_one_job_are_grouped_from_their_environment(spawn):
    world = {"WORLD_SIZE": "3", "MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29555"}
    ranks = [spawn({**world, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in (2, 0, 1)]
    other = spawn({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "10.9.9.9", "MASTER_PORT": "1"})
    loner = spawn({})
    want = {p.pid: ((i,), 1000.0) for i, p in enumerate([*ranks, other, loner])}
    procs = ProcessReader().read(want)
    jobs = group_jobs(procs)
    big = jobs[0]
    assert big.key == "master:10.1.2.3:29555"
    assert big.pids == (ranks[1].pid, ranks[2].pid, ranks[0].pid)  # rank order 0, 1, 2
    assert big.world_size == 3 and big.gpus == (0, 1, 2)
    keys = {j.key for j in jobs}
    assert "master:10.9.9.9:1" in keys and f"pid:{loner.pid}" in keys


def test_torchelastic_run_id_wins_over_master_address(spawn):
    env = {
        "RANK": "0",
        "WORLD_SIZE": "2",
        "TORCHELASTIC_RUN_ID": "abc",
        "MASTER_ADDR": "h",
        "MASTER_PORT": "1",
    }
    p = spawn(env)
    (proc,) = ProcessReader().read({p.pid: ((0,), None)})
    assert proc.rank == rank_from_env(env)
    assert group_jobs([proc])[0].key == "torchelastic:abc"


def test_children_of_a_torchrun_parent_form_one_job_without_rank_variables():
    a = ProcessInfo(
        pid=11,
        ppid=10,
        parent_cmd="/usr/bin/python -m torch.distributed.run --nproc 2 x.py",
        cmdline=("python", "x.py"),
        gpus=(0,),
    )
    b = ProcessInfo(pid=12, ppid=10, parent_cmd=a.parent_cmd, cmdline=("python", "x.py"), gpus=(1,))
    (job,) = group_jobs([a, b])
    assert job.key == "parent:10" and job.gpus == (0, 1)


def test_unreadable_environments_make_one_node_wide_group():
    a = ProcessInfo(pid=1, gpus=(0,), cmdline=("python",), env_error=ENV_DENIED)
    b = ProcessInfo(pid=2, gpus=(1,), cmdline=("python",), rank=RankInfo(rank=0, master="h:1"))
    (job,) = group_jobs([a, b])
    assert job.key == "node" and job.gpus == (0, 1)
    assert "unreadable" in job.how


def test_processes_on_no_gpu_are_not_jobs():
    assert group_jobs([ProcessInfo(pid=1, cmdline=("bash",))]) == ()


def test_a_process_that_exits_is_dropped_not_raised(spawn):
    p = spawn({})
    reader = ProcessReader()
    assert len(reader.read({p.pid: ((0,), None)})) == 1
    p.kill()
    p.wait()
    assert reader.read({p.pid: ((0,), None)}) == []
