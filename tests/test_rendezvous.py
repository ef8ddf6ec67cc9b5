"""A rank that never came: a real CPU torch.distributed rendezvous on loopback, world 3,
ranks 0 and 1 started, rank 2 never. `gputui check --json` must report the job with
"rendezvous" in its reason and `missing_ranks: [2]`, within 15 s, with no GPU involved;
`merge` keeps the ranks missing on every node.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from conftest import free_port, run_cli

from gputui.collect.model import RankInfo
from gputui.collect.procs.hostranks import HostRank, listeners
from gputui.diagnose.hang.rendezvous import candidates, missing, sentences, verdict_from_record
from gputui.diagnose.merge.join import line_from_json, merge
from gputui.diagnose.merge.merged import merged_to_json
from gputui.tools.which import find_tool

needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed"
)
needs_py_spy = pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")

RANK = (
    "import datetime, torch.distributed as dist\n"
    "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=300))\n"
)


@pytest.fixture
def waiting() -> Iterator[tuple[list[subprocess.Popen], int]]:
    """Ranks 0 and 1 of a world of 3, in init_process_group, rank 0's store listening."""
    port = free_port()
    procs = []
    for r in (0, 1):
        env = {
            **os.environ,
            "RANK": str(r),
            "WORLD_SIZE": "3",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", RANK],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
    try:
        deadline = time.monotonic() + 120  # importing torch on a busy 2-core box
        while not any(pid == procs[0].pid for pid, _ in listeners(port)):
            assert time.monotonic() < deadline, "rank 0's TCPStore never listened"
            assert all(p.poll() is None for p in procs), "a rank exited"
            time.sleep(0.1)
        yield procs, port
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=30)


@needs_torch
@needs_py_spy
def test_check_reports_the_rendezvous_and_the_rank_that_never_came(waiting):
    procs, port = waiting
    start = time.monotonic()
    r = run_cli("check", "--json", "--interval", "0.5", timeout=60)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    # `check` watches the whole host: another test's ranks may be forming a world right now
    # (a probe's workers are, for a second or two), so this job is picked by its key.
    key = f"master:127.0.0.1:{port}"
    ours = [d for d in lines if d.get("job_key") == key]
    hit = next((d for d in ours if "rendezvous" in d["reason"]), None)
    assert hit is not None, (r.stdout, r.stderr)
    assert r.returncode == 1
    assert hit["missing_ranks"] == [2]
    assert hit["state"] in ("stalled", "hung")
    assert hit["t"] - lines[0]["t"] <= 15.0 and time.monotonic() - start < 60
    assert hit["world_size"] == 3
    assert (
        f"127.0.0.1:{port} is listening (the TCPStore, in rank 0 pid {procs[0].pid})"
        in (hit["reason"])
    )
    assert hit["findings"][0].startswith("rendezvous: rank 2 never came")
    assert sum("rendezvous" in d["reason"] for d in ours) <= 3  # not a line per sample
    jobs = hit["rendezvous"]["jobs"]
    assert "init_process_group" in jobs[0]["frame"]  # the stack says it, not the command line
    assert sorted(h["pid"] for h in jobs[0]["here"]) == sorted(p.pid for p in procs)


# ---------------------------------------------------------------- pure parts


def rank(pid: int, r: int, world: int, ct: float, master: str = "10.0.0.1:29500") -> HostRank:
    info = RankInfo(rank=r, world_size=world, master=master)
    return HostRank(pid, ct, info, "python3", "10.0.0.1", 29500)


def test_a_job_is_judged_only_after_its_ranks_waited_or_were_there_before_gputui():
    young = [rank(1, 0, 2, ct=100.0)]
    assert candidates(young, now=105.0, started=50.0) == {}
    assert list(candidates(young, now=111.0, started=50.0)) == ["master:10.0.0.1:29500"]
    assert list(candidates(young, now=101.0, started=200.0)) == ["master:10.0.0.1:29500"]


def test_missing_ranks_of_a_huge_world_are_listed_up_to_a_bound_and_counted():
    miss, count = missing(1 << 20, {0})
    assert len(miss) == 1024 and count == (1 << 20) - 1


def test_a_port_taken_by_someone_else_is_said():
    j = {
        "job": "master:10.0.0.1:29500",
        "world": 2,
        "here": [{"pid": 5, "rank": 0}],
        "missing_ranks": [1],
        "master_addr": "127.0.0.1",
        "master_port": 29500,
        "master_local": True,
        "listeners": [[77, "0.0.0.0:29500", "nginx"]],
        "since": 0.0,
    }
    reason, finding = sentences(j, 30.0)
    assert "127.0.0.1:29500 is taken by pid 77 (nginx), not by this job" in reason
    assert finding == (
        "rendezvous: rank 1 never came (not seen on this node); rank 0 wait in the rendezvous "
        "(init_process_group)"
    )
    j["listeners"] = []
    assert "nobody listens on 127.0.0.1:29500" in sentences(j, 30.0)[0]
    v = verdict_from_record({"jobs": [j]}, 100.0, hang_after=60.0)
    assert v is not None and v.state == "hung" and v.evidence["missing_ranks"] == [1]


def test_merge_keeps_the_ranks_missing_on_every_node():
    def line(host: str, miss: list[int]) -> dict:
        return {
            "t": 10.0,
            "state": "stalled",
            "spinning": [],
            "suspects": [],
            "reason": "job x: rendezvous hang: ...",
            "host": host,
            "job_key": "master:10.0.0.1:29500",
            "world_size": 4,
            "ranks": {},
            "missing_ranks": miss,
        }

    # node a has ranks 0,1; node b has rank 2: rank 3 never came anywhere
    lines = [line_from_json(line("a", [2, 3]), "a"), line_from_json(line("b", [0, 1, 3]), "b")]
    m = merge(lines)[-1]
    d = merged_to_json(m)
    assert d["missing_ranks"] == [3]
    assert "rendezvous" in d["reason"] and "rank 3 never came" in d["reason"]


def test_a_ranks_data_loader_workers_are_not_taken_for_ranks():
    parent = rank(10, 0, 2, ct=1.0)
    worker = HostRank(11, 2.0, parent.rank, "python3", "10.0.0.1", 29500, ppid=10)
    (rs,) = candidates([parent, worker], now=100.0, started=0.0).values()
    assert [r.pid for r in rs] == [10]


@pytest.fixture
def agent_waiting(tmp_path) -> Iterator[tuple[subprocess.Popen, int]]:
    """torchrun for 2 nodes with only this one: its agent waits in the rendezvous."""
    port = free_port()
    script = tmp_path / "noop.py"
    script.write_text("print('never runs')\n")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1"]
    argv += ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", str(script)]
    p = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        deadline = time.monotonic() + 120
        while not any(pid == p.pid for pid, _ in listeners(port)):
            assert time.monotonic() < deadline and p.poll() is None, "torchrun did not listen"
            time.sleep(0.1)
        yield p, port
    finally:
        os.killpg(p.pid, 9)
        p.wait(timeout=30)


@needs_torch
@needs_py_spy
def test_a_torchrun_agent_waiting_for_the_other_nodes_is_a_rendezvous_hang(agent_waiting):
    p, port = agent_waiting
    r = run_cli("check", "--json", "--interval", "0.5", timeout=60)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    key = f"torchrun:127.0.0.1:{port}"
    hit = next((d for d in lines if f"job {key}: rendezvous" in d["reason"]), None)
    assert hit is not None, (r.stdout, r.stderr)
    assert hit["reason"].startswith(
        f"job torchrun:127.0.0.1:{port}: rendezvous hang: torchrun (pid {p.pid}) has waited"
    )
    assert "for the other nodes (--nnodes 2); no rank has started" in hit["reason"]
    assert (
        f"127.0.0.1:{port} is listening (the rendezvous store, in torchrun pid {p.pid})"
        in (hit["reason"])
    )
    assert hit["missing_ranks"] == []
