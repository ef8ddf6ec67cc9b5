"""A slow job on every judging face of `gputui check`: the `slow` state in JSON lines, the
exit status (0 unless --fail-on-slow: 4), and py-spy's top functions of a real CPU-bound
straggler rank (a gloo job on the CPU where rank 0 does 20x the work)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_cli
from straggler_job import gloo_straggler_job
from synth import timeline, with_real_pids

from gputui.collect.trace.format import TraceWriter
from gputui.commands.check_text import profile_lines as _profile_lines
from gputui.diagnose.exitcodes import SLOW
from gputui.diagnose.hang.detector import Detector
from gputui.tools.attach.profile import StragglerProfiler, fold
from gputui.tools.which import find_tool

TARGETS = Path(__file__).parent / "targets"

DATA = Path(__file__).parent / "data"
STRAGGLER = str(DATA / "h200x4-straggler-4x.jsonl.gz")


def write(path: Path, *segments) -> str:
    w = TraceWriter(path)
    for s in timeline(*segments):
        w.write(s)
    w.close()
    return str(path)


def lines_of(r) -> list[dict]:
    return [json.loads(x) for x in r.stdout.splitlines()]


def test_the_recorded_straggler_prints_a_slow_line_naming_gpu_0():
    r = run_cli("check", "--replay", STRAGGLER, "--json")
    assert r.returncode == 0, r.stderr  # slow is not a failure unless asked
    lines = lines_of(r)
    # (at the end rank 3 exits first: the waiting GPUs change, so a second slow line)
    assert [x["state"] for x in lines] == ["ok", "slow", "slow", "ok"]
    slow = lines[1]
    assert slow["stragglers"] == [0] and slow["suspects"] == [] and slow["spinning"] == []
    assert slow["wait_share"]["0"] == 0.0
    assert all(slow["wait_share"][g] >= 0.95 for g in ("1", "2", "3"))
    assert slow["reason"].startswith("job node (4 procs): slow: GPU 0 is the straggler")
    why = slow["why_slow"]["gpus"]["0"]
    assert why["events"] == ["sw_power_cap"] and why["power_w"] > 600
    assert slow["why_slow"]["peers"]["sm_mhz"] == 1980.0
    # every line carries `stragglers`, the ok ones empty
    assert lines[0]["stragglers"] == [] and lines[-1]["stragglers"] == []


def test_the_straggler_is_named_within_15_s_of_the_imbalance_in_a_replay():
    r = run_cli("check", "--replay", STRAGGLER, "--json")
    t_imbalance = 1795339048.021 + 6.846  # first sample of phase imbalanced_mild
    slow = next(x for x in lines_of(r) if x["state"] == "slow")
    assert slow["t"] - t_imbalance <= 15.0


def test_fail_on_slow_exits_4():
    r = run_cli("check", "--replay", STRAGGLER, "--fail-on-slow")
    assert r.returncode == SLOW == 4, r.stderr
    assert "SLOW" in r.stdout and "GPU 0 is the straggler" in r.stdout


def test_a_hang_outranks_slow_even_with_fail_on_slow(tmp_path):
    path = write(
        tmp_path / "slow-then-hung.jsonl.gz",
        (15, ["compute", "slow_peer"]),
        (70, ["idle", "spin"]),
    )
    r = run_cli("check", "--replay", path, "--json", "--fail-on-slow")
    assert r.returncode == 1
    states = [x["state"] for x in lines_of(r)]
    assert states == ["ok", "slow", "ok", "stalled", "hung"]
    hung = lines_of(r)[-1]
    assert hung["stragglers"] == [] and hung["suspects"] == [0]  # a hang has a suspect


def test_a_job_whose_ranks_all_wait_alike_is_ok_and_says_why(tmp_path):
    cycle = [(0.75, ["slow_peer"] * 2), (0.5, ["compute"] * 2)] * 16
    path = write(tmp_path / "alike.jsonl.gz", *cycle)
    r = run_cli("check", "--replay", path, "--fail-on-slow")
    assert r.returncode == 0
    assert "all ranks wait alike" in r.stdout and "outside the GPUs" in r.stdout


def test_profile_straggler_on_a_recording_profiles_nothing_and_still_reports():
    r = run_cli("check", "--replay", STRAGGLER, "--json", "--profile-straggler")
    assert r.returncode == 0 and all("profile" not in x for x in lines_of(r))


# ------------------------------------------------------------------ py-spy of a real rank


def test_collapsed_stacks_fold_into_innermost_and_inclusive_shares():
    text = "a (x.py:1);b (x.py:2) 3\na (x.py:1) 1\nnot a stack line\nc (y.py:9) 0\n"
    n, own, total = fold(text)
    assert n == 4
    assert own == [("b (x.py:2)", 0.75), ("a (x.py:1)", 0.25)]
    assert total[0] == ("a (x.py:1)", 1.0)
    assert fold("") == (0, [], [])


def test_profile_lines_show_the_top_functions_or_why_not():
    done = {"pid": 7, "outcome": "done", "top_self": [{"frame": "f (a.py:1)", "share": 0.9}]}
    assert "90%  f (a.py:1)" in _profile_lines(done)
    assert "refused: a recording" in _profile_lines(
        {"pid": 7, "outcome": "refused", "message": "a recording"}
    )
    assert _profile_lines(None) == ""


@pytest.fixture
def gloo_job():
    """A real 2-rank gloo job, rank 0 the straggler; both killed at the end."""
    with gloo_straggler_job() as pids:
        yield pids


@pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")
def test_the_straggler_of_a_real_gloo_job_is_profiled_to_its_busy_function(gloo_job):
    """Rank 0's GPU reads busy, rank 1's waits (synthetic readings: no GPU here); the
    detector names rank 0, and a few seconds of py-spy find its time in crunch()."""
    det, prof = Detector(), StragglerProfiler(seconds=2.0)
    try:
        v = snap = None
        for k in range(60):
            snap = with_real_pids(1000.0 + 0.25 * k, gloo_job, ["compute", "slow_peer"])
            v = det.update(snap)
        assert v is not None and v.state == "slow" and v.stragglers == (0,)
        assert v.slow_why["pids"] == [gloo_job[0]]
        deadline = time.monotonic() + 30
        got = None
        while got is None and time.monotonic() < deadline:
            got = prof.poll(v, snap)
            if got is None:
                prof.wait(1.0)
    finally:
        prof.close()
    assert got is not None, "the profile did not finish within its bounds"
    assert got["outcome"] == "done", got["message"]
    assert got["gpu"] == 0 and got["rank"] == 0 and got["pid"] == gloo_job[0]
    top = got["top_self"][0]
    assert top["frame"].startswith("crunch (gloo_straggler.py:") and top["share"] >= 0.5
    assert any(e["frame"].startswith("heavy_step") for e in got["top_total"])
    assert "crunch (gloo_straggler.py:" in _profile_lines(got)


def test_two_samplers_fold_into_wall_time_with_each_frames_idle_share():
    """The --idle sampler saw 100 samples, the running one 12: load_batch was idle in 85 of
    its 88 samples, step() ran in all of its 12."""
    from gputui.tools.attach.profile import Row, fold_wall, idle_kind, row_sentence

    wall = "main (t.py:9);load_batch (t.py:3) 88\nmain (t.py:9);step (t.py:6) 12\n"
    running = "main (t.py:9);load_batch (t.py:3) 3\nmain (t.py:9);step (t.py:6) 9\n"
    n, idle, own, total = fold_wall(wall, running)
    assert n == 100 and idle == 0.88
    assert own[0] == Row("load_batch (t.py:3)", 0.88, 0.85)
    assert own[1] == Row("step (t.py:6)", 0.12, 0.03)  # 3 running samples were missed
    assert total[0].frame == "main (t.py:9)" and total[0].share == 1.0
    assert idle_kind([("S", "hrtimer_nanosleep"), ("R", "0"), ("S", "do_nanosleep")]) == "sleeping"
    assert idle_kind([("S", "futex_wait_queue")]) == "waiting on a lock or another thread"
    assert idle_kind([("D", "io_schedule")]).startswith("in the kernel")
    assert idle_kind([("R", "0")]) is None
    assert row_sentence(own[0], "sleeping") == "load_batch (t.py:3): 88% of wall time, sleeping"
    assert row_sentence(own[1], "sleeping") == "step (t.py:6): 12% of wall time, running"


@pytest.fixture
def host_bound():
    """A real process that sleeps 40 ms in load_batch() and computes a few ms each step."""
    proc = subprocess.Popen(
        [sys.executable, str(TARGETS / "host_bound.py"), "60"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline()  # blocks until the first step is done
        assert line.startswith("ready "), line
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")
def test_a_host_bound_rank_is_profiled_in_wall_time_to_its_sleeping_input_function(host_bound):
    """The 4 x H200 case: the rank sleeping 40 ms a step in its input function read
    "synchronize 80 %, the input function 20 %" when idle samples were left out. In wall
    time its input function holds most samples, and the profile says it was asleep there."""
    from gputui.tools.attach.profile import profile_rank

    prof = profile_rank(host_bound, seconds=2.0)
    assert prof.result.ok, prof.result.message
    top = prof.top_self[0]
    assert top.frame.startswith("load_batch (host_bound.py:") and top.share >= 0.6
    assert top.idle / top.share >= 0.8
    assert prof.idle_share is not None and prof.idle_share >= 0.6
    assert prof.samples >= 60  # every sample, idle ones too: ~100 at 50 Hz for 2 s
    assert prof.idle_kind == "sleeping"
    assert prof.sentence().startswith("load_batch (host_bound.py:")
    assert prof.sentence().endswith("of wall time, sleeping")
    assert prof.to_json()["basis"] == "wall"
