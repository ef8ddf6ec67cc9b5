"""A hang in a small collective on 4 x H200 is a hang, and a straggler's quiet wait is not.

Recorded on a real 4 x H200 node (NCCL, one rank per GPU): ranks 0-2 wait in a 4 MiB
all_reduce that rank 3 never enters (one of its threads holds the GIL). NCCL's small-message
protocols poll harder than its large ones: the waiting GPUs read util 100 and mem_util 0 at
every sample, like the classic spin, but draw 29-31% of the 700 W limit instead of ~18%.
`tests/data/h200x4-small-collective-spin.trace.jsonl.gz` holds those readings as
`nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,power.draw,power.limit
-lms 500` printed them (times rebuilt from the 0.5 s interval; the ranks' pids and rank
variables from the job's own READY lines). `gputui check` called it "3 of 4 GPUs busy, none
spinning" and exited 0 before the node-wide rule (classify_node).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gputui.collect.model import GpuSample
from gputui.diagnose.hang.classify import GpuState, classify_gpu, classify_node

DATA = Path(__file__).parent / "data"
SPIN = DATA / "h200x4-small-collective-spin.trace.jsonl.gz"


def gpu(index: int, util: float, mem: float, watts: float, pids=(100,)) -> GpuSample:
    return GpuSample(
        index=index, util=util, mem_util=mem, power_w=watts, power_limit_w=700.0, pids=pids
    )


def test_a_quiet_wait_at_30_percent_spins_when_no_gpu_of_the_node_computes():
    waiting = [gpu(i, 100, 0, 210) for i in range(3)]
    culprit = gpu(3, 0, 0, 123)  # its rank never launched the collective
    assert all(classify_gpu(g) is not GpuState.SPINNING for g in waiting)  # alone: not
    states = classify_node([*waiting, culprit])
    assert [states[i] for i in range(3)] == [GpuState.SPINNING] * 3
    assert states[3] is GpuState.IDLE


def test_the_same_quiet_wait_beside_a_computing_straggler_is_not_a_spin():
    """A rank that waits on a slow peer reads alike, but its peer computes (~97% of the
    limit on the recorded 4x straggler): that job progresses."""
    waiting = [gpu(i, 99, 0, 200) for i in range(1, 4)]
    straggler = gpu(0, 97, 23, 680)
    states = classify_node([straggler, *waiting])
    assert GpuState.SPINNING not in states.values()


def test_memory_traffic_or_high_power_is_never_the_quiet_wait():
    assert classify_node([gpu(0, 100, 1, 210), gpu(1, 0, 0, 123)])[0] is not GpuState.SPINNING
    assert classify_node([gpu(0, 100, 0, 300), gpu(1, 0, 0, 123)])[0] is not GpuState.SPINNING


def test_the_recorded_small_collective_hang_is_called_with_rank_3_suspect():
    out = subprocess.run(
        [sys.executable, "-m", "gputui", "check", "--replay", str(SPIN), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    lines = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{")]
    stalled = [d for d in lines if d["state"] == "stalled"]
    assert stalled, [d["reason"] for d in lines]
    assert stalled[0]["spinning"] == [0, 1, 2] and stalled[0]["suspects"] == [3]
    assert stalled[0]["suspect_pids"] == [2596]
