"""Sooner when the evidence is plain: a real gloo job whose rank 1 is stuck, NCCL RAS naming
it behind with its count unchanged, and no sign of progress from it: `gputui check` calls
the stall before --stall-after.

What is real: a 2-rank torch.distributed job on gloo (tests/targets/gloo_rank.py: rank 0
waits in all_reduce, rank 1 sleeps in load_next_batch_stuck), py-spy, /proc, and gputui run
as a person runs it, against the stand-in libnvidia-ml.so.1 (`spin_gpu:0`: GPU 0 spins, GPU
1 idles). What stands in: NCCL RAS, a TCP server (tests/ras_server.py) answering for the
job's real pids in NCCL's own JSON, rank 1 behind in AllReduce; and the NCCL library, a
shared object named libnccl.so.2.28.9 built here and preloaded, so gputui finds NCCL loaded
in the ranks and asks RAS, as it does on a GPU node.

Onset to headline is measured from the spin's first sample (`since`) to the first stalled
line: with RAS and the progress records it comes at EARLY_S (5 s) plus a sample; without
RAS, at --stall-after (10 s), as the control in tests/test_busy_live.py measures.
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

GLOO_RANK = Path(__file__).parent / "targets" / "gloo_rank.py"
STALL_AFTER = 10.0
EARLY_WITHIN_S = 8.0  # EARLY_S (5 s) + a RAS interval's confirmation + a sample, bounded


def ras_answer(pids: list[int]) -> bytes:
    """NCCL's RAS JSON for a 2-rank communicator: rank 1 behind in AllReduce (812 vs 813)."""
    counts = {"Broadcast": 1, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0}
    return ras_json(pids, [{**counts, "AllReduce": n} for n in (813, 812)])


@pytest.fixture
def fake_nccl(tmp_path: Path) -> Path:
    """A real (empty) shared object named like NCCL, for the ranks to preload."""
    return stand_in_nccl(tmp_path)


def rank_argv(rank: int) -> list[str]:
    """Rank 0 runs its loop; rank 1 is stuck in a data loader that never returns."""
    return [str(GLOO_RANK), "--lifetime", "120", *(["--stuck"] if rank else [])]


@pytest.fixture
def gloo_job(fake_nccl: Path) -> Iterator:
    ranks = GlooRanks(fake_nccl)
    yield lambda ras_port: ranks.start(ras_port, rank_argv)
    ranks.close()


def test_ras_naming_a_rank_that_makes_no_progress_calls_the_stall_before_stall_after(gloo_job):
    with ras_server(b"") as srv:
        port = srv.port  # a free port, for the ranks' NCCL_RAS_ADDR
    pids = gloo_job(port)
    env = standin_env(build_standin(), "spin_gpu:0", pids=pids)
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "gputui", "check", "--json", "--duration", "12"]
    with ras_server(*[ras_answer(pids)] * 40, port=port):
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    first = next(x for x in lines if x["state"] == "stalled")
    took = first["t"] - first["since"]
    print(f"RAS + no progress: stalled {took:.1f} s after the spin's onset")
    for x in lines:
        print(f"  +{x['t'] - first['since']:5.1f} s {x['state']:8s} {x['reason'][:90]}")
    assert took < STALL_AFTER and took <= EARLY_WITHIN_S, [(x["t"], x["state"]) for x in lines]
    assert first["suspects"] == [1] and pids[1] in first["suspect_pids"]
    last = lines[-1]
    ras = [f for f in last["findings"] if f.startswith("NCCL RAS: rank 1 (")]
    assert ras and f"pid {pids[1]}" in ras[0] and "is behind" in ras[0], last["findings"]
    assert any("load_next_batch_stuck" in f for f in last["findings"]), last["findings"]
