"""Dump all ranks: real processes with rank environments, grouped so the odd one stands out."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from conftest import free_port, run_cli
from targets.launch import Targets

from gputui.collect.model import Job, ProcessInfo, RankInfo, Snapshot
from gputui.tools.attach.dumpall import dump_all, group_dumps, parse_py_spy
from gputui.tools.attach.jobfind import find_job, job_from_host
from gputui.tools.attach.rank_dump import RankDump
from gputui.tools.result import Outcome, ToolResult
from gputui.tools.which import find_tool

needs_py_spy = pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")


@pytest.fixture
def targets() -> Iterator[Targets]:
    t = Targets()
    yield t
    t.close()


def start_job(targets: Targets, roles: list[str], **extra: str) -> list[int]:
    """One process per rank, with the variables torchrun would set; a port of its own so
    other tests' processes never look like the same job."""
    env = {
        "WORLD_SIZE": str(len(roles)),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        **extra,
    }
    pids = []
    for rank, role in enumerate(roles):
        p = targets.start(role, env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)})
        pids.append(p.pid)
    return pids


@needs_py_spy
def test_three_ranks_in_all_reduce_and_one_in_the_data_loader_make_two_groups(targets):
    pids = start_job(targets, ["allreduce", "allreduce", "loader", "allreduce"])
    job = job_from_host(pids[1])
    assert job.pids == tuple(pids)
    assert job.ranks == {pid: r for r, pid in enumerate(pids)}
    assert "MASTER_ADDR:PORT=127.0.0.1:" in job.how

    res = dump_all(list(job.pids), ranks=job.ranks)
    assert res.ok, [d.result.summary() for d in res.dumps]
    assert [g.header() for g in res.groups] == ["ranks 0,1,3 (3 processes)", "rank 2 (1 process)"]
    big, odd = res.groups
    assert not big.odd and odd.odd
    assert [m.pid for m in big.members] == [pids[0], pids[1], pids[3]]
    assert big.stack[0].startswith("all_reduce (blocked.py:")
    assert odd.stack[0].startswith("wait_for_the_data_loader (blocked.py:")
    assert "stands out: rank 2 (1 process)" in res.summary_lines()


@needs_py_spy
def test_with_two_ranks_the_one_outside_the_collective_is_the_odd_one(targets):
    pids = start_job(targets, ["loader", "allreduce"], TORCHELASTIC_RUN_ID=uuid.uuid4().hex)
    job = find_job(pids[0])
    assert job.pids == tuple(pids) and "TORCHELASTIC_RUN_ID" in job.how
    res = dump_all(list(job.pids), ranks=job.ranks)
    assert [(g.header(), g.odd) for g in res.groups] == [
        ("rank 1 (1 process)", False),
        ("rank 0 (1 process)", True),
    ]


@needs_py_spy
def test_a_rank_that_cannot_be_dumped_is_its_own_odd_group(targets):
    pids = start_job(targets, ["allreduce", "allreduce"])
    z = targets.zombie()
    res = dump_all([*pids, z], ranks={pids[0]: 0, pids[1]: 1, z: 2})
    assert not res.ok
    assert [g.header() for g in res.groups] == ["ranks 0,1 (2 processes)", "rank 2 (1 process)"]
    assert res.groups[1].odd and not res.groups[1].ok
    assert res.groups[1].body()[0].startswith("dump failed: rank 2")


def test_the_job_comes_from_the_gpu_snapshot_when_it_has_one():
    procs = tuple(
        ProcessInfo(pid=100 + r, gpus=(r,), rank=RankInfo(rank=r, world_size=2, master="h:1"))
        for r in range(2)
    )
    job = Job(key="master:h:1", label="h:1 (2 procs)", pids=(100, 101), gpus=(0, 1), how="x")
    snap = Snapshot(t=0.0, processes=procs, jobs=(job,))
    found = find_job(101, snap)
    assert found.pids == (100, 101) and found.ranks == {100: 0, 101: 1}
    assert found.processes == procs


# Real py-spy output from the hung 2 x H200 run (tests/data/h200x2-tool-output).
H200_RANK0 = """Process 814: /opt/torch/.venv/bin/python3 ./worker2.py stall_in_loop 35
Python v3.12.3 (/usr/bin/python3.12)

Thread 814 (active): "MainThread"
    synchronize (torch/cuda/__init__.py:1162)
    train_step (worker2.py:21)
    <module> (worker2.py:38)
"""
H200_RANK1 = """Process 815: /opt/torch/.venv/bin/python3 ./worker2.py stall_in_loop 35
Python v3.12.3 (/usr/bin/python3.12)

Thread 815 (idle): "MainThread"
    <module> (worker2.py:37)
"""
H200_NATIVE = """Thread 1024 (active): "MainThread"
    0x7f01521dfe19 (libcuda.so.580.159.04)
    cuCtxSynchronize_v2 (libcuda.so.580.159.04)
    synchronize (torch/cuda/__init__.py:1162)
    <module> (worker2.py:43)
"""


def _dump(pid: int, rank: int, text: str) -> RankDump:
    lines = tuple(text.splitlines())
    res = ToolResult("py-spy", pid, Outcome.DONE, "", lines)
    return RankDump(pid, rank, res, parse_py_spy(lines))


def test_real_h200_hang_dumps_point_at_the_rank_outside_synchronize():
    groups = group_dumps([_dump(814, 0, H200_RANK0), _dump(815, 1, H200_RANK1)])
    assert [(g.header(), g.odd) for g in groups] == [
        ("rank 0 (1 process)", False),
        ("rank 1 (1 process)", True),
    ]
    assert groups[0].stack[0] == "synchronize (torch/cuda/__init__.py:1162)"


def test_native_addresses_do_not_split_groups_but_functions_and_lines_do():
    a = _dump(1, 0, H200_NATIVE)
    b = _dump(2, 1, H200_NATIVE.replace("0x7f01521dfe19", "0x7f9d7bd52044"))
    c = _dump(3, 2, H200_NATIVE.replace("worker2.py:43", "worker2.py:44"))
    d = _dump(4, 3, H200_NATIVE.replace("(active)", "(idle)"))
    groups = group_dumps([a, b, c, d])
    assert [g.header() for g in groups] == ["ranks 0,1,3 (3 processes)", "rank 2 (1 process)"]
    assert "cuCtxSynchronize_v2 (libcuda.so.580.159.04)" in groups[0].stack


@needs_py_spy
def test_cli_dump_job_prints_the_groups_and_marks_the_odd_one(targets):
    pids = start_job(targets, ["allreduce", "loader", "allreduce", "allreduce"])
    r = run_cli("dump", "--job", str(pids[2]))
    assert r.returncode == 0, r.stderr
    assert "ranks 0,2,3 (3 processes)" in r.stdout
    assert "rank 1 (1 process)  <-- differs" in r.stdout
    r = run_cli("dump", "--job", str(pids[0]), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["job"]["pids"] == pids
    assert [(g["ranks"], g["odd"]) for g in doc["groups"]] == [([0, 2, 3], False), ([1], True)]
    assert all(res["outcome"] == "done" for res in doc["results"])
