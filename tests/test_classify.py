"""What one GPU is doing at one sample: the per-GPU classes the hang rule is built from.

The reference readings come from the real 2 x H200 recording (tests/data), and the
power thresholds are fractions of each GPU's own limit, so other models are judged alike.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from synth import gpu

from gputui.collect.model import GpuSample
from gputui.diagnose.hang.classify import (
    COMPUTE_POWER_FRAC_MIN,
    SPIN_MEM_UTIL_MAX,
    SPIN_POWER_FRAC_MAX,
    SPIN_UTIL_MIN,
    GpuState,
    classify_gpu,
)


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("free", GpuState.FREE),  # no process: ~78 W of 700
        ("idle", GpuState.IDLE),  # a live context, no kernel: ~120 W
        ("spin", GpuState.SPINNING),  # NCCL kernel waiting on a peer: util 100, mem 0, ~123 W
        ("comm", GpuState.COMMUNICATING),  # healthy all_reduce: util 97, mem 35, ~290 W
        ("compute", GpuState.COMPUTING),  # training: util 98, mem 23, ~690 W
        ("slow_peer", GpuState.COMMUNICATING),  # waits on a slow rank, collectives complete
    ],
)
def test_each_reference_point_of_the_calibration_is_classified_as_measured(state, expected):
    assert classify_gpu(gpu(0, state)) is expected


def test_the_raw_calibration_readings_without_a_power_limit_still_classify():
    # The calibration format has power_w but no limit: no power fraction, util+mem decide.
    for state, expected in [("spin", GpuState.SPINNING), ("comm", GpuState.COMMUNICATING)]:
        g = replace(gpu(0, state), power_limit_w=None)
        assert g.power_frac is None
        assert classify_gpu(g) is expected


def test_power_is_relative_to_each_gpus_own_limit():
    a100 = 400.0
    # Spinning on an A100 draws about the same share of its limit: 70 W is 17.5 %.
    assert classify_gpu(replace(gpu(0, "spin", limit=a100), power_w=70.0)) is GpuState.SPINNING
    # 120 W is idle power on an H200 but 30 % of an A100: a kernel doing work, not spinning.
    assert classify_gpu(replace(gpu(0, "spin", limit=a100), power_w=120.0)) is not (
        GpuState.SPINNING
    )
    # And the same 120 W on the 700 W H200 is 17 %: spinning.
    assert classify_gpu(replace(gpu(0, "spin"), power_w=120.0)) is GpuState.SPINNING


@pytest.mark.parametrize(
    ("util", "mem_util", "frac", "spinning"),
    [
        (SPIN_UTIL_MIN, 0.0, 0.18, True),
        (SPIN_UTIL_MIN - 1, 0.0, 0.18, False),  # not resident the whole time
        (100.0, SPIN_MEM_UTIL_MAX, 0.18, True),
        (100.0, SPIN_MEM_UTIL_MAX + 1, 0.18, False),  # memory moves: collectives complete
        (100.0, 0.0, SPIN_POWER_FRAC_MAX, True),
        (100.0, 0.0, SPIN_POWER_FRAC_MAX + 0.01, False),  # more than idle power: real work
    ],
)
def test_the_spinning_thresholds_are_where_the_docs_say(util, mem_util, frac, spinning):
    g = GpuSample(
        index=0, util=util, mem_util=mem_util, power_w=frac * 700, power_limit_w=700, pids=(1,)
    )
    assert (classify_gpu(g) is GpuState.SPINNING) is spinning


def test_high_power_means_computing_even_when_memory_is_quiet():
    g = GpuSample(
        index=0,
        util=100,
        mem_util=0,
        power_w=COMPUTE_POWER_FRAC_MIN * 700,
        power_limit_w=700,
        pids=(1,),
    )
    assert classify_gpu(g) is GpuState.COMPUTING


def test_missing_readings_are_unknown_never_a_guess():
    assert classify_gpu(GpuSample(index=0, pids=(1,))) is GpuState.UNKNOWN
    # Busy, but neither memory activity nor power to tell spinning from working.
    assert classify_gpu(GpuSample(index=0, util=100, pids=(1,))) is GpuState.UNKNOWN


def test_a_busy_gpu_with_no_visible_process_is_not_called_free():
    # NVML may not list the processes of another container; the readings still count.
    g = replace(gpu(0, "compute"), pids=())
    assert classify_gpu(g) is GpuState.COMPUTING
    assert classify_gpu(replace(gpu(0, "idle"), pids=())) is GpuState.FREE
