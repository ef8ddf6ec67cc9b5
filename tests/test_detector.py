"""The hang detector on constructed sequences: each test is one situation from practice.

Samples come every 0.25 s (as in the real recording); `timeline` takes (seconds, per-GPU
states) segments, and one job spans all GPUs unless `jobs=` says otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from synth import many_processes, snapshot, timeline, with_gpu

from gputui.collect.model import Snapshot
from gputui.collect.trace.format import read_trace
from gputui.diagnose.hang.detector import Detector, diagnose_trace
from gputui.diagnose.verdict import verdict_to_json

DATA = Path(__file__).parent / "data"


def final(*segments, stall_after=10.0, hang_after=60.0, **kw):
    return diagnose_trace(timeline(*segments, **kw), stall_after, hang_after)[-1]


def states_seen(*segments, **kw):
    return {v.state for v in diagnose_trace(timeline(*segments, **kw))}


# ---------------------------------------------------------------- the classic hang


def test_the_classic_hang_names_the_idle_rank_within_the_window():
    v = final((12, ["spin", "idle"]))
    assert v.state == "stalled"
    assert v.spinning == (0,) and v.suspects == (1,) and v.suspect_pids == (1001,)
    assert "GPU 1 idle" in v.reason
    assert v.gpu_states == {0: "spinning", 1: "idle"}
    assert any("gputui dump 1001" in s for s in v.next_steps)
    assert any("gputui dump --job 1000" in s for s in v.next_steps)  # a waiting rank


def test_the_alarm_is_raised_at_stall_after_not_before():
    vs = diagnose_trace(timeline((15, ["spin", "idle"])))
    first = next(v for v in vs if v.state != "ok")
    assert first.t - vs[0].t == pytest.approx(10.0, abs=0.3)
    assert first.since == vs[0].t


def test_stalled_becomes_hung_after_hang_after():
    v = final((61, ["spin", "idle"]))
    assert v.state == "hung" and "HUNG" in v.reason
    assert final((40, ["spin", "idle"]), hang_after=30).state == "hung"


def test_the_next_steps_cover_what_practice_recommends():
    steps = " ".join(final((12, ["spin", "idle"])).next_steps)
    for advice in (
        "NCCL_DEBUG=INFO",
        "TORCH_NCCL_TRACE_BUFFER_SIZE",
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
    ):
        assert advice in steps
    assert "NCCL_LAUNCH_MODE" not in steps  # only when one process drives several GPUs
    assert "--shm-size" not in steps  # only when a rank vanished


def test_the_alarm_clears_when_the_hung_processes_are_gone():
    vs = diagnose_trace(timeline((15, ["spin", "idle"]), (2, ["free", "free"])))
    assert vs[-9].state == "stalled" and vs[-1].state == "ok"


def test_a_debugger_pausing_the_waiting_rank_does_not_restart_the_clock():
    v = final((12, ["spin", "idle"]), (0.75, ["idle", "idle"]), (2, ["spin", "idle"]))
    assert v.state == "stalled"
    assert v.t - v.since > 14


# ---------------------------------------------------------------- no false alarms


def test_brief_waits_shorter_than_the_window_never_alarm():
    wait_then_work = [(6, ["spin", "idle"]), (1, ["compute", "compute"])] * 10
    # (GPU 1 holding GPU 0 back step after step is a straggler: slow, never a hang.)
    assert states_seen(*wait_then_work) <= {"ok", "slow"}
    # Nor do short waits separated by CPU work (idle), which must not chain into one run.
    wait_then_cpu = [(6, ["spin", "idle"]), (1, ["idle", "idle"])] * 10
    assert states_seen(*wait_then_cpu) == {"ok"}


def test_a_slow_but_progressing_peer_is_not_a_hang():
    assert states_seen((30, ["slow_peer", "compute"])) <= {"ok", "slow"}  # slow: a straggler


def test_healthy_and_idle_jobs_never_alarm():
    assert states_seen((30, ["compute", "compute"])) == {"ok"}
    assert states_seen((30, ["comm", "comm"])) == {"ok"}
    assert states_seen((30, ["idle", "idle"])) == {"ok"}  # an idle inference server
    assert states_seen((30, ["free", "free"])) == {"ok"}


def test_a_node_without_gpus_is_ok_and_says_why():
    v = Detector().update(Snapshot(t=1.0, gpu_error="no NVIDIA driver"))
    assert v.state == "ok" and "no NVIDIA driver" in v.reason


# ---------------------------------------------------------------- who is named


def test_seven_of_eight_spinning_name_the_eighth():
    v = final((12, ["spin"] * 7 + ["idle"]))
    assert v.spinning == tuple(range(7)) and v.suspects == (7,)


def test_one_of_eight_spinning_names_every_rank_that_is_not_in_the_collective():
    # One rank waits in a collective for 10 s while the seven others keep computing: they
    # have not reached it. All seven are named; the reason says they are busy elsewhere.
    v = final((12, ["compute"] * 3 + ["spin"] + ["compute"] * 4))
    assert v.state == "stalled" and v.spinning == (3,)
    assert v.suspects == (0, 1, 2, 4, 5, 6, 7)
    assert "busy computing" in v.reason


def test_every_gpu_that_does_not_spin_is_a_suspect_whatever_it_does():
    v = final((12, ["spin"] * 6 + ["idle", "compute"]))
    assert v.suspects == (6, 7)
    assert "GPU 6 idle" in v.reason and "GPU 7 busy computing" in v.reason


def test_all_spinning_names_no_suspect_and_says_what_to_do():
    v = final((12, ["spin"] * 4))
    assert v.state == "stalled" and v.spinning == (0, 1, 2, 3) and v.suspects == ()
    assert "no single suspect can be named from NVML" in v.reason
    assert "dump all ranks" in v.reason


def test_a_rank_that_died_is_the_suspect_after_its_process_is_gone():
    v = final((2, ["compute", "compute"]), (12, ["spin", "gone"]))
    assert v.state == "stalled" and v.suspects == (1,) and v.vanished == (1,)
    assert v.suspect_pids == (1001,)  # remembered from before it exited
    assert "has exited" in v.reason
    assert any("--shm-size" in s for s in v.next_steps)


def test_a_dead_rank_stays_named_through_a_long_hang():
    v = final((2, ["compute", "compute"]), (70, ["spin", "gone"]))
    assert v.state == "hung" and v.suspects == (1,)


def test_a_rank_that_left_long_before_the_stall_is_not_blamed():
    # GPU 1's process left 70 s (more than hang_after) before GPU 0 started spinning.
    v = final((2, ["compute", "compute"]), (70, ["compute", "gone"]), (12, ["spin", "gone"]))
    assert v.state == "stalled" and v.suspects == ()


def test_a_rank_that_died_before_gputui_started_is_inferred_from_local_ranks():
    # gputui starts after rank 1 died: NVML never showed its process. Rank 0 says the job
    # has two local ranks and sits on GPU 0 = LOCAL_RANK 0, so rank 1 belongs on GPU 1.
    v = final((12, ["spin", "gone"]), local=True)
    assert v.state == "stalled" and v.spinning == (0,) and v.suspects == (1,)
    assert v.suspect_pids == () and v.vanished == (1,)
    assert "no process of local rank 1" in v.reason


def test_no_gpu_is_inferred_when_ranks_are_not_placed_by_local_rank():
    # Rank 0 runs on GPU 1 and rank 1 on GPU 0: the convention does not hold, so the dead
    # rank's GPU cannot be told and none is named.
    v = final((12, ["gone", "spin"]), jobs=[[1, 0]], local=True)
    assert v.state == "stalled" and v.spinning == (1,) and v.suspects == ()


def test_the_real_h200_rank_that_died_before_the_check_started():
    # Recorded on 2 x H200 (scripts/device/check_detector.sh, mode die): rank 1 exited before the
    # recording began; rank 0 spins in all_reduce on GPU 0.
    verdicts = diagnose_trace(read_trace(DATA / "h200x2-die-unseen.trace.jsonl.gz"))
    alarm = next(v for v in verdicts if v.state != "ok")
    assert alarm.spinning == (0,) and alarm.suspects == (1,)
    assert alarm.t - verdicts[0].t <= 10.5


def test_two_jobs_on_one_node_only_the_stuck_one_is_named():
    v = final((12, ["spin", "idle", "compute", "compute"]), jobs=[[0, 1], [2, 3]])
    assert v.state == "stalled" and v.spinning == (0,) and v.suspects == (1,)
    assert "h:29500" in (v.job or "")
    assert "other job" not in v.reason


def test_when_two_jobs_stall_the_worse_is_shown_and_the_other_mentioned():
    v = final((12, ["spin", "idle", "spin", "spin"]), jobs=[[0, 1], [2, 3]])
    assert v.suspects == (1,)  # the job with a suspect to name comes first
    assert "1 other job(s) stalled too" in v.reason


def test_a_process_driving_several_gpus_gets_the_launch_mode_advice():
    snaps = timeline((12, ["spin", "idle", "spin"]))
    # GPU 2 runs the same process as GPU 0, as a single-process multi-GPU job would.
    v = diagnose_trace(with_gpu(snaps, 2, pids=(1000,)))[-1]
    assert v.state == "stalled"
    assert any("NCCL_LAUNCH_MODE=GROUP" in s for s in v.next_steps)


# ---------------------------------------------------------------- readings and hardware


def test_missing_power_falls_back_to_util_and_memory_and_says_so():
    v = final((12, ["spin", "idle"]), no_power=(0, 1))
    assert v.state == "stalled" and v.suspects == (1,)
    assert not v.power_known and "judged from util and memory" in v.reason
    ok = final((5, ["compute", "compute"]), no_power=(0,))
    assert not ok.power_known and "power or its limit is not reported" in ok.reason


def test_power_missing_on_the_suspect_only_does_not_weaken_the_verdict():
    v = final((12, ["spin", "idle"]), no_power=(1,))
    assert v.state == "stalled" and v.power_known and "judged from util" not in v.reason


def test_power_is_judged_against_each_gpus_own_limit():
    a100 = [400.0, 400.0]
    # 18 % of a 400 W A100 is 72 W: spinning, so the hang is found.
    assert final((12, ["spin", "idle"]), limits=a100).state == "stalled"
    # 120 W on a 400 W card is 30 %: still a quiet wait at util 100 and no memory traffic
    # while no GPU computes (NCCL's small collectives drew 29-31 % on 4 x H200)...
    quiet = with_gpu(timeline((30, ["spin", "idle"]), limits=a100), 0, power_w=120.0)
    assert "stalled" in {v.state for v in diagnose_trace(quiet)}
    # ...and 180 W is 45 %: a kernel doing real work, never a hang.
    busy = with_gpu(timeline((30, ["spin", "idle"]), limits=a100), 0, power_w=180.0)
    assert {v.state for v in diagnose_trace(busy)} == {"ok"}


# ---------------------------------------------------------------- the interface


def test_the_json_line_starts_with_the_documented_keys():
    d = verdict_to_json(final((12, ["spin", "idle"])))
    assert list(d)[:5] == ["t", "state", "spinning", "suspects", "reason"]
    assert d["spinning"] == [0] and d["suspects"] == [1] and d["suspect_pids"] == [1001]


def test_the_bundle_gets_the_whole_verdict():
    d = final((12, ["spin", "idle"])).to_json()
    assert d["gpu_states"] == {"0": "spinning", "1": "idle"} and d["power_known"] is True


def test_the_detector_refuses_windows_that_make_no_sense():
    with pytest.raises(ValueError):
        Detector(stall_after=10, hang_after=5)
    with pytest.raises(ValueError):
        Detector(stall_after=0)


def test_a_crowded_node_is_judged_quickly_and_correctly():
    # 8 GPUs, 1000 processes: one 8-rank job plus 124 one-process jobs per GPU, as the
    # dashboard sees every tick. The notebook processes on the spinning GPUs are not blamed.
    snaps = [many_processes(1000 + 0.25 * k, ["spin"] * 7 + ["idle"], 125) for k in range(2)]
    assert len(snaps[0].processes) == 1000
    det = Detector()
    for k in range(60):  # its cost per update is a benchmark: bench/sampler_cost.py
        v = det.update(Snapshot(**{**snaps[k % 2].__dict__, "t": 1000 + 0.25 * k}))
    assert v.state == "stalled" and v.spinning == tuple(range(7)) and v.suspects == (7,)
    assert "other job" not in v.reason


def test_snapshot_helper_builds_one_job_of_all_gpus():
    s = snapshot(0.0, ["spin", "idle"])
    assert len(s.jobs) == 1 and s.jobs[0].gpus == (0, 1)
