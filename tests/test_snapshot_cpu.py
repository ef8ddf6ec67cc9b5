"""`gputui snapshot` tells the truth about CPU: measured over an interval, busiest first.

A single read of a process's CPU times has no interval to measure over, so the old snapshot
showed 0.0 for a process at 99%. Here a real child spins on a CPU while `gputui snapshot`
runs; its CPU% must show it, and the host list (this machine has no GPU to show, or the
test makes sure of it with the stand-in's "no driver") must be sorted by CPU%.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest
from conftest import HAS_GPU, REPO
from nvml_standin.build import build_standin, standin_env

from gputui.collect.procs.reader import HostTop, ProcessReader

SPIN = "import sys\nprint('ready', flush=True)\nwhile True:\n    pass\n"


@pytest.fixture
def spinner() -> Iterator[subprocess.Popen]:
    """A child that keeps one CPU busy, returned once it runs (it said so on its pipe)."""
    p = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    yield p
    p.kill()
    p.wait(timeout=10)
    p.stdout.close()


def host_snapshot(*args: str) -> dict:
    """`gputui snapshot --json` as a user runs it, on a node with no GPU to show."""
    env = None if not HAS_GPU else standin_env(build_standin(), "no_driver")
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "snapshot", "--json", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_busy_process_shows_its_cpu(spinner):
    child = psutil.Process(spinner.pid)
    before, t0 = sum(child.cpu_times()[:2]), time.monotonic()
    snap = host_snapshot()
    got = (sum(child.cpu_times()[:2]) - before) / (time.monotonic() - t0) * 100
    assert snap["gpus"] == [] and snap["source"] == "host"
    (me,) = [p for p in snap["processes"] if p["pid"] == spinner.pid]
    # A spinning child gets a whole CPU on a quiet machine (> 50%); on a crowded one, at
    # least about the share it really had while gputui ran.
    assert me["cpu"] > min(50.0, 0.6 * got), (me["cpu"], got)


def test_the_host_list_is_sorted_by_cpu_busiest_first(spinner):
    procs = host_snapshot("--interval", "0.3")["processes"]
    cpus = [p["cpu"] for p in procs]
    measured = [c for c in cpus if c is not None]
    assert measured == sorted(measured, reverse=True)
    assert cpus[: len(measured)] == measured  # the unmeasured (new) ones come last
    assert spinner.pid in [p["pid"] for p in procs]  # a busy process makes the list


def test_snapshot_interval_is_bounded():
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "snapshot", "--interval", "3600"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert r.returncode == 2
    assert r.stderr == "gputui: --interval: at most 10 s for a snapshot\n"


def test_the_first_read_of_a_process_has_no_cpu_figure_the_next_has(spinner):
    reader = ProcessReader()
    (first,) = reader.read({spinner.pid: ((), None)})
    assert first.cpu_percent is None  # no interval yet: unknown, not 0.0
    (second,) = reader.read({spinner.pid: ((), None)})
    assert second.cpu_percent is not None  # measured since the first read


def test_host_top_ranks_only_what_it_has_measured(spinner):
    top = HostTop(limit=1000)
    assert all(cpu is None for _, cpu in top.top())  # the first call only starts the clocks
    ranked = top.top()
    measured = [cpu for _, cpu in ranked if cpu is not None]
    assert measured == sorted(measured, reverse=True)
    assert spinner.pid in dict(ranked)
