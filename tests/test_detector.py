"""The hang detector on constructed sequences: each test is one situation from practice."""

from __future__ import annotations

import pytest
from synth import gpu, snapshot, timeline

from gputui.diagnose.classify import GpuState, classify_gpu
from gputui.diagnose.detector import Detector, diagnose_trace


def final(*segments, stall_after=10.0, hang_after=60.0, **kw):
    return diagnose_trace(timeline(*segments, **kw), stall_after, hang_after)[-1]


def states_seen(*segments, **kw):
    return {v.state for v in diagnose_trace(timeline(*segments, **kw))}


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("free", GpuState.FREE),
        ("idle", GpuState.IDLE),
        ("spin", GpuState.SPINNING),
        ("comm", GpuState.COMMUNICATING),
        ("compute", GpuState.COMPUTING),
        ("slow_peer", GpuState.COMMUNICATING),
    ],
)
def test_each_reference_point_of_the_calibration_is_classified_as_measured(state, expected):
    assert classify_gpu(gpu(0, state)) is expected


def test_the_classic_hang_names_the_idle_rank_within_the_window():
    v = final((12, ["spin", "idle"]))
    assert v.state == "stalled"
    assert v.spinning == (0,) and v.suspects == (1,) and v.suspect_pids == (1001,)
    assert "GPU 1 idle" in v.reason
    assert any("gputui dump 1001" in s for s in v.next_steps)


def test_the_alarm_is_raised_at_stall_after_not_before():
    vs = diagnose_trace(timeline((15, ["spin", "idle"])))
    first = next(v for v in vs if v.state != "ok")
    assert first.t - vs[0].t == pytest.approx(10.0, abs=0.3)


def test_brief_waits_shorter_than_the_window_never_alarm():
    wait_then_work = [(6, ["spin", "idle"]), (1, ["compute", "compute"])] * 10
    assert states_seen(*wait_then_work) == {"ok"}


def test_a_slow_but_progressing_peer_is_not_a_hang():
    assert states_seen((30, ["slow_peer", "compute"])) == {"ok"}


def test_healthy_and_idle_jobs_never_alarm():
    assert states_seen((30, ["compute", "compute"])) == {"ok"}
    assert states_seen((30, ["comm", "comm"])) == {"ok"}
    assert states_seen((30, ["idle", "idle"])) == {"ok"}  # an idle inference server
    assert states_seen((30, ["free", "free"])) == {"ok"}


def test_one_gpu_of_eight_spinning_names_the_idle_one_not_the_busy_ones():
    states = ["spin"] * 7 + ["idle"]
    v = final((12, states))
    assert v.spinning == tuple(range(7)) and v.suspects == (7,)
    lone = ["compute"] * 3 + ["spin"] + ["compute"] * 4  # one rank ahead, the rest busy
    v = final((12, lone))
    assert v.state == "stalled" and v.spinning == (3,)
    assert v.suspects == (0, 1, 2, 4, 5, 6, 7)
    assert "busy computing" in v.reason


def test_all_spinning_names_no_suspect_and_says_what_to_do():
    v = final((12, ["spin"] * 4))
    assert v.state == "stalled" and v.suspects == ()
    assert "no single suspect can be named" in v.reason
    assert "dump all ranks" in v.reason


def test_a_rank_that_died_is_the_suspect_after_its_process_is_gone():
    v = final((2, ["compute", "compute"]), (12, ["spin", "gone"]))
    assert v.state == "stalled" and v.suspects == (1,) and v.vanished == (1,)
    assert v.suspect_pids == (1001,)
    assert "has exited" in v.reason
    assert any("--shm-size" in s for s in v.next_steps)


def test_stalled_becomes_hung_after_hang_after():
    v = final((61, ["spin", "idle"]))
    assert v.state == "hung" and "HUNG" in v.reason
    assert final((40, ["spin", "idle"]), hang_after=30).state == "hung"


def test_the_alarm_clears_when_the_hung_processes_are_gone():
    vs = diagnose_trace(timeline((15, ["spin", "idle"]), (2, ["free", "free"])))
    assert vs[-9].state == "stalled" and vs[-1].state == "ok"


def test_missing_power_falls_back_to_util_and_memory_and_says_so():
    v = final((12, ["spin", "idle"]), no_power=(0, 1))
    assert v.state == "stalled" and v.suspects == (1,)
    assert not v.power_known and "judged from util and memory" in v.reason


def test_power_is_judged_against_each_gpus_own_limit():
    # 18% of a 400 W A100 is 72 W: spinning.
    assert final((12, ["spin", "idle"]), limits=[400.0, 400.0]).state == "stalled"
    # 120 W on a 400 W card is 30%: a kernel doing real work, not a spinning one.
    busy = gpu(0, "spin", limit=400.0)
    busy = type(busy)(**{**busy.__dict__, "power_w": 120.0})
    assert classify_gpu(busy) is not GpuState.SPINNING


def test_two_jobs_on_one_node_only_the_stuck_one_is_named():
    v = final((12, ["spin", "idle", "compute", "compute"]), jobs=[[0, 1], [2, 3]])
    assert v.state == "stalled" and v.spinning == (0,) and v.suspects == (1,)
    assert "h:29500" in (v.job or "")


def test_a_debugger_pausing_the_waiting_rank_does_not_restart_the_clock():
    v = final((12, ["spin", "idle"]), (0.75, ["idle", "idle"]), (2, ["spin", "idle"]))
    assert v.state == "stalled"
    assert v.t - v.since > 14


def test_the_detector_refuses_windows_that_make_no_sense():
    with pytest.raises(ValueError):
        Detector(stall_after=10, hang_after=5)
    with pytest.raises(ValueError):
        Detector(stall_after=0)


def test_a_node_without_gpus_is_ok_and_says_why():
    from gputui.collect.model import Snapshot

    v = Detector().update(Snapshot(t=1.0, gpu_error="no NVIDIA driver"))
    assert v.state == "ok" and "no NVIDIA driver" in v.reason


def test_a_process_driving_several_gpus_gets_the_launch_mode_advice():
    snaps = list(timeline((12, ["spin", "idle", "spin"])))
    # Give GPU 2 the same process as GPU 0, as a single-process multi-GPU job would.
    fixed = []
    for s in snaps:
        g2 = type(s.gpus[2])(**{**s.gpus[2].__dict__, "pids": s.gpus[0].pids})
        fixed.append(type(s)(**{**s.__dict__, "gpus": (s.gpus[0], s.gpus[1], g2)}))
    v = diagnose_trace(fixed)[-1]
    assert any("NCCL_LAUNCH_MODE=GROUP" in s for s in v.next_steps)


def test_snapshot_helper_builds_one_job_of_all_gpus():
    s = snapshot(0.0, ["spin", "idle"])
    assert len(s.jobs) == 1 and s.jobs[0].gpus == (0, 1)
