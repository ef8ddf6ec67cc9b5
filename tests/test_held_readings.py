"""Readings held between NVML reads (power limit, links up) are still fresh when they change.

The reader asks NVML for the power limit every HELD_FOR_S instead of at every sample, and
the health monitor asks the NVLinks' states every LINKS_EVERY_S instead of at every counter
read (driver calls saved at rest). What must not be lost: a limit changed while gputui runs
(`nvidia-smi -pl`), or a link gone down, shows within that period. The stand-in
libnvidia-ml.so.1 (tests/nvml_standin/standin.c, modes power_limit_after:N:W and
nvlink_down_after:N:L) makes the change after N utilization reads; `gputui record` writes
what each sample showed, and the stand-in's call log counts how often each was asked. It
records alone (a PID namespace of its own): its exit is its worst verdict over the host's
jobs, and another test's waiting ranks beside it are rightly a hang (CI, twice).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from nvml_standin.build import REPO, build_standin, gputui_argv, standin_env

from gputui.collect.nvml.health import COUNTER_EVERY_S, LINKS_EVERY_S
from gputui.collect.nvml.reader import HELD_FOR_S

INTERVAL = 0.5
GPUS = 2  # the stand-in's default
CHANGE_AFTER = 4  # samples with the old limit; the 5th reads the new one from NVML
# The period, plus the tick that falls due after it and one a loaded box may pass over.
LATEST = HELD_FOR_S + 2 * INTERVAL


@pytest.fixture(scope="module")
def nvml_lib() -> Path:
    return build_standin()


def record(nvml_lib: Path, tmp_path: Path, seconds: float) -> tuple[list[dict], list[str]]:
    """Samples of `gputui record` (one dict per GPU per sample) and the NVML calls made."""
    out, log = tmp_path / "rec.jsonl", tmp_path / "calls.log"
    env = standin_env(nvml_lib, f"power_limit_after:{CHANGE_AFTER * GPUS}:500")
    env["GPUTUI_STANDIN_LOG"] = str(log)
    argv = gputui_argv(
        "record", "--interval", str(INTERVAL), "--duration", str(seconds), str(out), alone=True
    )
    r = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return [r for r in rows if "gpu" in r and "power_limit_w" in r], log.read_text().split()


def test_a_power_limit_changed_while_running_shows_within_its_period(nvml_lib, tmp_path):
    samples, calls = record(nvml_lib, tmp_path, seconds=2 * HELD_FOR_S + 4)
    times = sorted({s["t"] for s in samples})
    assert times[-1] - times[CHANGE_AFTER] > LATEST + 1, "too few samples to judge"
    changed_at = times[CHANGE_AFTER]  # the first sample whose NVML answers 500 W
    for s in samples:
        if s["t"] < changed_at:
            assert s["power_limit_w"] == 700.0  # never a limit before it was set
        elif s["t"] > changed_at + LATEST:
            assert s["power_limit_w"] == 500.0, f"still {s['power_limit_w']} W at {s['t']}"
    first_new = min(s["t"] for s in samples if s["power_limit_w"] == 500.0)
    assert first_new - changed_at <= LATEST
    # ...and held in between: asked about once per GPU per period, not at every sample.
    asked = calls.count("nvmlDeviceGetEnforcedPowerLimit")
    per_sample = calls.count("nvmlDeviceGetUtilizationRates")
    assert per_sample >= GPUS * len(times)
    assert asked <= GPUS * (1 + len(times) * INTERVAL / HELD_FOR_S + 1)
    assert asked < per_sample / 3


def test_a_link_that_goes_down_shows_within_its_period_and_is_not_asked_every_read(
    nvml_lib, tmp_path
):
    """Links up and down (18 calls a GPU) are asked every LINKS_EVERY_S, the other health
    counters every COUNTER_EVERY_S: a link down shows at the first counter read after the
    links' period, and the reads in between carry the last answer (no record says it
    changed)."""
    out, log = tmp_path / "rec.jsonl", tmp_path / "calls.log"
    env = standin_env(nvml_lib, f"nvlink_down_after:{2 * GPUS}:3")
    env.update(GPUTUI_STANDIN_NVLINK="18", GPUTUI_STANDIN_NVLINK_COST_US="0")
    env["GPUTUI_STANDIN_LOG"] = str(log)
    seconds = LINKS_EVERY_S + COUNTER_EVERY_S + 4
    argv = gputui_argv(
        "record", "--interval", str(INTERVAL), "--duration", str(seconds), str(out), alone=True
    )
    r = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    times = sorted({row["t"] for row in rows if row.get("gpu") == 0})
    went_down = times[2]  # the third sample: its NVML says link 3 is down
    seen = [
        (row["t"], row["counters"]["0"]["nvlink_down"])
        for row in rows
        if row.get("type") == "health" and "counters" in row
    ]
    assert seen[0] == (times[0], 0)  # the first read asks the links
    assert [down for _, down in seen] == [0, 1]  # one change, written once
    assert seen[1][0] - went_down <= LINKS_EVERY_S + COUNTER_EVERY_S + 2 * INTERVAL
    calls = log.read_text().split()
    counter_reads = calls.count("nvmlDeviceGetPcieReplayCounter") // GPUS
    link_reads = calls.count("nvmlDeviceGetNvLinkState") / (GPUS * 18)
    assert counter_reads >= 4
    assert 1 <= link_reads < counter_reads - 1
