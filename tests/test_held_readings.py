"""A reading held between NVML reads (the enforced power limit) is still fresh when it changes.

The reader asks NVML for the power limit every HELD_FOR_S instead of at every sample (a
driver call per GPU per sample saved at rest). What must not be lost: a limit changed while
gputui runs (`nvidia-smi -pl`) shows within that period. The stand-in libnvidia-ml.so.1
(tests/nvml_standin/standin.c, mode power_limit_after:N:W) lowers every GPU's limit from
700 W to W after N utilization reads; `gputui record` writes each sample with the limit it
showed, and the stand-in's call log counts how often the limit was asked.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from nvml_standin.build import REPO, build_standin, gputui_argv, standin_env

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
    argv = gputui_argv("record", "--interval", str(INTERVAL), "--duration", str(seconds), str(out))
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
