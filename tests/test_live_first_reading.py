"""The GPUs' first reading comes before psutil and the health monitor are even imported, and is
the first sample's GPU part: the dashboard's first frame waits for NVML alone, and no NVML call
is made twice for it.

Each case runs LiveSource in a fresh interpreter against the stand-in libnvidia-ml.so.1 with
4 GPUs, whose log (GPUTUI_STANDIN_LOG) names every NVML entry point called.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from nvml_standin.build import REPO, build_standin, standin_env

PROBE = """
import json, sys
from gputui.collect.live import LiveSource
seen = []
def first(snap, description):
    seen.append({
        "gpus": [g.index for g in snap.gpus],
        "power": [g.power_w for g in snap.gpus],
        "processes": len(snap.processes),
        "records": len(snap.records),
        "description": description,
        "loaded": [m for m in ("psutil", "gputui.collect.nvml.health", "gputui.redact")
                   if m in sys.modules],
        "reads": open(sys.argv[1]).read().split().count("nvmlDeviceGetUtilizationRates"),
    })
src = LiveSource(interval=0.5, health_events=False, on_gpus=first if sys.argv[2] == "1" else None)
snap = src.sample()
log = open(sys.argv[1]).read().split()
print(json.dumps({
    "seen": seen,
    "sample_gpus": [g.index for g in snap.gpus],
    "sample_power": [g.power_w for g in snap.gpus],
    "reads_after_first_sample": log.count("nvmlDeviceGetUtilizationRates"),
}))
src.close()
"""


@pytest.fixture(scope="module")
def nvml_lib() -> Path:
    return build_standin()


def probe(nvml_lib: Path, tmp_path: Path, early: bool, mode: str = "ok") -> dict:
    log = tmp_path / f"calls-{int(early)}.log"
    log.touch()
    env = standin_env(nvml_lib, mode)
    env.update(GPUTUI_STANDIN_GPUS="4", GPUTUI_STANDIN_LOG=str(log))
    r = subprocess.run(
        [sys.executable, "-c", PROBE, str(log), "1" if early else "0"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_first_reading_has_the_gpus_before_psutil_or_health_is_imported(nvml_lib, tmp_path):
    got = probe(nvml_lib, tmp_path, early=True)
    (first,) = got["seen"]
    assert first["gpus"] == [0, 1, 2, 3]
    assert first["power"] == got["sample_power"]  # the first sample is that same reading
    assert first["processes"] == 0 and first["records"] == 0
    assert first["description"] == "live NVML, 4 GPU(s), driver 580.159.04"
    assert first["loaded"] == []
    assert first["reads"] == 4  # one utilization read per GPU


def test_the_first_sample_reads_no_gpu_twice(nvml_lib, tmp_path):
    with_early = probe(nvml_lib, tmp_path, early=True)
    without = probe(nvml_lib, tmp_path, early=False)
    assert without["seen"] == []
    assert with_early["sample_gpus"] == without["sample_gpus"] == [0, 1, 2, 3]
    assert with_early["reads_after_first_sample"] == without["reads_after_first_sample"] == 4


HUNG = """
import json, os, sys
from gputui.collect.live import LiveSource
from gputui.collect.nvml.thread import NvmlHung
seen = []
src = LiveSource(timeout=1.0, health_events=False, on_gpus=lambda s, d: seen.append(d))
try:
    src.sample()
    said = None
except NvmlHung as e:
    said = str(e)
print(json.dumps({"seen": seen, "said": said}), flush=True)
os._exit(0)  # a thread is inside NVML for good: no destructor may wait for it
"""


def test_a_first_read_that_never_returns_draws_nothing_and_the_sample_says_why(nvml_lib):
    """The first read hangs: the source still opens (as it did before it read early), no
    early frame is drawn, and the first sample raises NvmlHung naming the call, at once."""
    env = standin_env(nvml_lib, "hang_read")
    env["GPUTUI_STANDIN_GPUS"] = "4"
    r = subprocess.run(
        [sys.executable, "-c", HUNG], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["seen"] == []
    assert "did not answer" in got["said"]
