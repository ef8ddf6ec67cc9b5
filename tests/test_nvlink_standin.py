"""NVLink error counters through real C calls: the stand-in libnvidia-ml.so.1 (tests/nvml_standin)
charges CPU for each (counter, link) read as driver 580 does on an H200 (0.8 ms), lists up to
8 GPUs x 18 links, and can make one link's CRC errors climb; every command runs as a user
runs it, in a subprocess.

What must hold (gputui.collect.nvml.nvlink): no answer waits for a counter (`snapshot` reads none,
`check`'s first line comes before the first read), the counter thread costs under 5 % of a
core on 8 GPUs x 18 links even at a pass a minute (about 0.8 %; the default pass, 5 minutes,
is 0.15 %; reading every link every 5 s on the sampling thread, as before, was 9 %), and a
link whose counters climb is named with its GPU and link, live and in a replay, while a
steady 8,000 since boot is not.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from nvml_standin.build import REPO, build_standin, gputui_argv, standin_env

EIGHT = {"GPUTUI_STANDIN_GPUS": "8", "GPUTUI_STANDIN_NVLINK": "18"}  # 0.8 ms a read: default
NONE = {"GPUTUI_STANDIN_GPUS": "8", "GPUTUI_STANDIN_NVLINK": "0"}  # the same node, no NVLink
COUNTER_CALL = "nvmlDeviceGetNvLinkErrorCounter"
# Noise allowance of the "no later" comparisons below (best of 3 each, alternated): a pass
# read before the answer would add 576 reads x 0.8 ms = 0.46 s of CPU.
SLACK = 1.25, 0.2
CPU_SHARE_MAX = 0.05  # of one core, over the span of the CPU test


@pytest.fixture(scope="module")
def nvml_lib() -> Path:
    return build_standin()


def env_of(lib: Path, node: dict[str, str], log: Path | None = None, **more: str) -> dict:
    env = standin_env(lib, more.pop("mode", "ok"))
    env.pop("GPUTUI_NVLINK_PASS_S", None)  # the default pass unless the node sets one
    env.update({**node, **more})
    if log is not None:
        env["GPUTUI_STANDIN_LOG"] = str(log)
    return env


def run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        gputui_argv(*args, alone=True),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def calls(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def best_of_3(*runs) -> list[float]:
    """Each callable's fastest of 3 runs, the callables alternating."""
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(3):
        for i, f in enumerate(runs):
            times[i].append(f())
    return [min(t) for t in times]


def test_snapshot_reads_no_nvlink_counter_and_is_no_slower_than_without_nvlink(nvml_lib, tmp_path):
    log = tmp_path / "calls.log"

    def snapshot(node: dict, log: Path | None = None):
        def go() -> float:
            t0 = time.monotonic()
            r = run(env_of(nvml_lib, node, log), "snapshot", "--json", "--interval", "0.2")
            took = time.monotonic() - t0
            assert r.returncode == 0, r.stderr
            assert len(json.loads(r.stdout)["gpus"]) == 8
            return took

        return go

    with_links, without = best_of_3(snapshot(EIGHT, log), snapshot(NONE))
    got = calls(log)
    assert got.count("nvmlDeviceGetNvLinkState") > 0  # it saw the links (links up: µs each)
    assert COUNTER_CALL not in got  # ...and read none of their error counters
    assert with_links <= without * SLACK[0] + SLACK[1], (with_links, without)


def first_line_after(env: dict) -> float:
    """Seconds from the start of `check --json` to its first line."""
    t0 = time.monotonic()
    argv = gputui_argv("check", "--json", "--interval", "0.5", "--duration", "2", alone=True)
    p = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        took = time.monotonic() - t0
        assert json.loads(line)["state"] == "ok"
    finally:
        p.kill()  # unshare ends its child with it (--kill-child)
        p.wait(timeout=30)
    return took


def test_the_first_check_line_comes_before_any_counter_read_and_no_later(nvml_lib, tmp_path):
    log = tmp_path / "calls.log"
    r = run(env_of(nvml_lib, EIGHT, log), "check", "--json", "--interval", "0.5", "--duration", "2")
    assert r.returncode == 0, r.stderr
    got = calls(log)
    samples = [i for i, c in enumerate(got) if c == "nvmlDeviceGetUtilizationRates"]
    first_read = got.index(COUNTER_CALL)  # read during the run...
    assert first_read > samples[8]  # ...only once the second sample began (8 GPUs a sample)
    with_links, without = best_of_3(
        lambda: first_line_after(env_of(nvml_lib, EIGHT)),
        lambda: first_line_after(env_of(nvml_lib, NONE)),
    )
    assert with_links <= without * SLACK[0] + SLACK[1], (with_links, without)


def cpu_seconds_of(argv: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def reap(p: subprocess.Popen) -> float:
    """The process's CPU seconds (its threads and the children it waited for)."""
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0, p.stderr.read() if p.stderr else ""
    return usage.ru_utime + usage.ru_stime


def test_the_counter_thread_costs_a_small_share_of_a_core_on_8_gpus_x_18_links(nvml_lib, tmp_path):
    """40 samples (20 s) of `check` on 8 GPUs x 18 links against the same node without NVLink,
    side by side so that the machine's load falls on both alike; CPU time, not wall time. At
    a pass a minute (a GPU every 7.5 s), 5 times the default's reads, so that two or three
    GPUs are read within the span."""
    span = 20.0
    argv = gputui_argv(
        "check", "--json", "--interval", "0.5", "--duration", f"{span:g}", alone=True
    )
    log_with, log_without = tmp_path / "with.log", tmp_path / "without.log"
    a = cpu_seconds_of(argv, env_of(nvml_lib, EIGHT, log_with, GPUTUI_NVLINK_PASS_S="60"))
    b = cpu_seconds_of(argv, env_of(nvml_lib, NONE, log_without))
    with_links, without = reap(a), reap(b)
    reads = calls(log_with).count(COUNTER_CALL)
    assert reads >= 2 * 18 * 4  # at least two GPUs' links were read in the span
    share = (with_links - without) / span
    assert share < CPU_SHARE_MAX, f"{share:.1%} of a core ({reads} reads)"


CLIMB = {
    "GPUTUI_STANDIN_GPUS": "2",
    "GPUTUI_STANDIN_NVLINK": "18",
    "GPUTUI_STANDIN_NVLINK_CLIMB": "1:7",  # 6,000 CRC errors a minute on GPU 1's link 7
    "GPUTUI_NVLINK_PASS_S": "2",  # a pass every 2 s instead of 5 minutes
}


def named(health: dict) -> list[tuple]:
    return [(f["gpu"], f["link"], f["counter"]) for f in health["findings"]]


def test_a_climbing_link_is_named_in_check_json_and_a_steady_high_total_is_not(nvml_lib):
    r = run(env_of(nvml_lib, CLIMB), "check", "--json", "--interval", "0.5", "--duration", "8")
    assert r.returncode == 0, r.stderr  # a rate is a finding, not a sick GPU
    h = json.loads(r.stdout.splitlines()[-1])["health"]
    assert named(h) == [(1, 7, "crc")]
    assert h["findings"][0]["text"].startswith("GPU 1 link 7: NVLink CRC errors at ")
    assert h["findings"][0]["per_min"] > 5_000
    g0 = h["gpus"]["0"]["nvlink"]
    assert g0["errors_since_boot"]["total"] >= 8_010 and g0["links_read"] == 18
    assert h["gpus"]["0"]["health"] == h["gpus"]["1"]["health"] == "ok"


def test_a_recording_replays_to_the_same_finding_and_snapshot_shows_the_rates(nvml_lib, tmp_path):
    out = tmp_path / "rec.jsonl"
    r = run(env_of(nvml_lib, CLIMB), "record", str(out), "--duration", "8", "--interval", "0.5")
    assert r.returncode == 0, r.stderr
    reads = [
        x
        for line in out.read_text().splitlines()
        if '"nvlink"' in line
        for x in json.loads(line)["nvlink"]["reads"]
    ]
    assert {x["gpu"] for x in reads} == {0, 1} and all(len(x["links"]) == 18 for x in reads)
    replay = run(env_of(nvml_lib, NONE), "check", "--replay", str(out), "--json")
    assert replay.returncode == 0, replay.stderr
    assert named(json.loads(replay.stdout.splitlines()[-1])["health"]) == [(1, 7, "crc")]
    snap = run(env_of(nvml_lib, NONE), "snapshot", "--replay", str(out), "--json")
    h = json.loads(snap.stdout)["health"]
    assert named(h) == [(1, 7, "crc")]
    assert h["gpus"]["1"]["nvlink"]["worst_link_per_min"]["crc"] > 5_000


def test_a_counter_the_gpu_does_not_support_is_na_once_and_not_asked_again(nvml_lib, tmp_path):
    log, out = tmp_path / "calls.log", tmp_path / "rec.jsonl"
    node = {"GPUTUI_STANDIN_GPUS": "1", "GPUTUI_STANDIN_NVLINK": "2", "GPUTUI_NVLINK_PASS_S": "1"}
    env = env_of(nvml_lib, node, log, mode="nvlink_counter_na:3")
    r = run(env, "record", str(out), "--duration", "4", "--interval", "0.5")
    assert r.returncode == 0, r.stderr
    got = calls(log)
    assert got.count("nvlink_counter_na_asked") == 1
    assert got.count(COUNTER_CALL) >= 2 * 4 + 2 * 3  # read again, without the n/a counter
    snap = run(env_of(nvml_lib, NONE), "snapshot", "--replay", str(out), "--json")
    g0 = json.loads(snap.stdout)["health"]["gpus"]["0"]
    assert g0["nvlink"]["na"] == {"crc_data": "n/a: Not Supported"}
    assert g0["health"] == "ok"


def test_a_counter_read_that_never_returns_ends_the_check_within_its_deadline(nvml_lib):
    """The read holds the library's lock, as a wedged driver call does, so the samples wait
    too: the check says NVML did not answer and leaves (through os._exit: the stand-in's
    destructor would wait on that lock for ever), within its deadlines, not at the duration."""
    node = {"GPUTUI_STANDIN_GPUS": "2", "GPUTUI_STANDIN_NVLINK": "2", "GPUTUI_NVLINK_PASS_S": "1"}
    env = env_of(nvml_lib, node, mode="hang_nvlink")
    t0 = time.monotonic()
    r = run(env, "check", "--json", "--interval", "0.5", "--duration", "30", "--timeout", "2")
    assert r.returncode == 2 and "NVML did not answer within 2 s" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 20
