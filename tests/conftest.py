"""Shared fixtures: the bundled demo recording, and real child processes to inspect."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.collect.source import demo_path
from gputui.collect.trace import read_trace

REPO = Path(__file__).resolve().parent.parent

# Deterministic rendering of times in snapshot tests.
os.environ["TZ"] = "UTC"
time.tzset()  # the C library reads TZ only here


@pytest.fixture(scope="session")
def demo_snaps():
    return read_trace(demo_path())


@pytest.fixture
def spawn() -> Iterator:
    """Start a real Python child that waits on stdin, with extra environment variables.

    Returns once the child has printed its ready line, i.e. after exec: only then does
    /proc/PID/environ hold the child's own environment.
    """
    children: list[subprocess.Popen] = []

    def start(env: dict[str, str] | None = None, code: str = "") -> subprocess.Popen:
        script = code + "\nimport sys\nprint('ready', flush=True)\nsys.stdin.read()\n"
        full = {**os.environ, **(env or {})}
        p = subprocess.Popen(
            [sys.executable, "-c", script],
            env=full,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        children.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        return p

    yield start
    for p in children:
        p.kill()
        p.wait(timeout=10)


def run_cli(*args: str, timeout: float = 60, env: dict[str, str] | None = None):
    """Run `python -m gputui ARGS` as a user would, capturing output."""
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


def _has_gpu() -> bool:
    from gputui.collect.nvml import NvmlReader

    r = NvmlReader()
    r.close()
    return bool(r.devices)


HAS_GPU = _has_gpu()
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU path; this machine has GPUs")


# Modules whose tests drive external programs end to end (a real Prometheus, sshd and ssh,
# tmux, a wheel build, torch jobs, the stand-in driver in many subprocesses). They test those
# programs with gputui, not the Python version: .ci/run runs them on the main Python only.
SLOW_MODULES = {
    "test_exporter_prometheus",
    "test_terminal",
    "test_packaging",
    "test_nvml_standin",
    "test_nvml_standin_tui",
    "test_secrets_corpus",
    "test_fleet",
    "test_flightrec",
    "test_probe",
    "test_probe_cli",
    "test_probe_screen",
    "test_multi_rank",
    "test_bench_quick",
    "test_world_probe",
    "test_world_screen",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
