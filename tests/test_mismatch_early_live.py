"""Ranks in different collectives are named in the verdict's first line within 10 s.

What is real: a 2-rank torch.distributed job on gloo (tests/targets/gloo_mismatch_rank.py:
rank 0 in `broadcast` from send_weights, rank 1 in `all_reduce` from train_step), py-spy,
/proc, and `gputui check --json` run as a person runs it against the stand-in
libnvidia-ml.so.1 (`spin`: both GPUs spin in their collective). What stands in: NCCL RAS, a
TCP server (tests/ras_server.py) answering in NCCL's own JSON for the job's real pids, rank 0
ahead in Broadcast and rank 1 in AllReduce, the same in every answer; and NCCL itself, an
empty libnccl.so.2.28.9 preloaded so that gputui asks RAS, as on a GPU node.

Before: the first alarm at --stall-after (10 s), "different lines in synchronize" on the GPU
machine, the collectives named only at +19 s. Now the first stalled line names both
collectives, and comes before --stall-after (gputui.watch.mismatch_early).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gloo_ranks import GlooRanks
from nvml_standin.build import REPO, build_standin, standin_env
from ras_server import ras_json, ras_server, stand_in_nccl

from gputui.tools.which import find_tool

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed"),
    pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc to build a stand-in libnccl"),
]

TARGET = Path(__file__).parent / "targets" / "gloo_mismatch_rank.py"
STALL_AFTER = 10.0


def ras_answer(pids: list[int]) -> bytes:
    """NCCL's RAS JSON: rank 0 ahead in Broadcast (2 vs 1), rank 1 ahead in AllReduce."""
    counts = [
        {"Broadcast": 2 - r, "AllReduce": 1 + r, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0}
        for r in range(len(pids))
    ]
    return ras_json(pids, counts)


@pytest.fixture
def fake_nccl(tmp_path: Path) -> Path:
    return stand_in_nccl(tmp_path)


@pytest.fixture
def job(fake_nccl: Path) -> Iterator:
    ranks = GlooRanks(fake_nccl)
    yield lambda ras_port: ranks.start(ras_port, lambda rank: [str(TARGET), "120"])
    ranks.close()


def test_the_first_stalled_line_names_both_collectives_before_stall_after(job):
    with ras_server(b"") as srv:
        port = srv.port
    pids = job(port)
    env = standin_env(build_standin(), "spin", pids=pids)
    env["PYTHONPATH"] = str(REPO)
    argv = [
        sys.executable,
        "-m",
        "gputui",
        "check",
        "--json",
        "--duration",
        "12",
        "--stall-after",
        str(STALL_AFTER),
    ]
    with ras_server(*[ras_answer(pids)] * 40, port=port):
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    first = next(x for x in lines if x["state"] == "stalled")
    took = first["t"] - first["since"]
    for x in lines:
        print(f"  +{x['t'] - first['since']:5.1f} s {x['state']:8s} {x['reason'][:120]}")
    assert took < STALL_AFTER, [(x["t"] - first["since"], x["state"]) for x in lines]
    head = first["reason"]
    assert head.startswith("ranks in different collectives"), head
    assert "Broadcast" in head or "broadcast" in head, head
    assert "AllReduce" in head or "all_reduce" in head, head
    last = lines[-1]  # the stacks add each rank's line
    assert last["reason"].startswith("ranks in different collectives: rank 0 in broadcast ("), last
    assert "rank 1 in all_reduce (" in last["reason"]
