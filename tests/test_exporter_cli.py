"""`gputui exporter` as a user runs it: a real process, scraped over HTTP, stopped by signal.

Scrapes go through urllib and are parsed with prometheus_client's parser. Bad input ends in
one line on stderr and exit status 2. Waits are on the process's pipe and on HTTP answers,
each with a deadline.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from conftest import REPO, no_gpu_only, run_cli
from prometheus_client.parser import text_string_to_metric_families

from gputui.collect.source import ReplaySource
from gputui.commands.exporter import NEEDS_CLIENT
from gputui.exporter.looping import LoopingSource

# `--demo --start` time (s, counted from where the demo starts, 60.2 s into the file) just
# before the demo's stall_in_loop job starts spinning (at ~65.7 s into the file).
DEMO_SPIN_START = 4.8


@dataclass
class Exporter:
    proc: subprocess.Popen
    url: str

    def scrape(self) -> list:
        with urllib.request.urlopen(self.url, timeout=10) as r:
            text = r.read().decode()
        return [s for fam in text_string_to_metric_families(text) for s in fam.samples]


def read_line(stream, deadline: float) -> str:
    """One line from a pipe, waiting at most until `deadline` (monotonic)."""
    fd, buf = stream.fileno(), b""
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(0.0, left))
        if not ready:
            raise AssertionError(f"no line within the deadline; got {buf!r}")
        chunk = os.read(fd, 1)
        if not chunk:
            break
        buf += chunk
    return buf.decode()


def start_exporter(*args: str) -> Exporter:
    """`gputui exporter ARGS --listen 127.0.0.1:0`, once it says where it serves."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "exporter", *args, "--listen", "127.0.0.1:0"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    line = read_line(proc.stderr, time.monotonic() + 60)
    assert "serving http://" in line, line
    return Exporter(proc, line.split("serving ", 1)[1].split()[0])


@pytest.fixture
def exporter() -> Iterator:
    procs: list[subprocess.Popen] = []

    def start(*args: str) -> Exporter:
        e = start_exporter(*args)
        procs.append(e.proc)
        return e

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)


def poll(fn, deadline_s: float, what: str):
    """Call fn until it returns something truthy, up to deadline_s seconds."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = fn()
        if got:
            return got
        time.sleep(0.1)  # the poll's pace; the bound is the deadline
    raise AssertionError(f"{what}: not within {deadline_s} s")


# ---------------------------------------------------------------- the demo, scraped


def test_the_demo_exporter_shows_the_stall_and_its_suspect_then_stops_on_sigterm(exporter):
    e = exporter("--demo", "--start", str(DEMO_SPIN_START), "--speed", "4")

    def stalled():
        ss = e.scrape()
        on = [s for s in ss if s.name == "gputui_job_state" and s.labels["state"] == "stalled"]
        return ss if on and on[0].value == 1.0 else None

    ss = poll(stalled, 60, "the demo's stall")
    (suspect,) = [s for s in ss if s.name == "gputui_job_suspect"]
    assert suspect.labels["gpu"] == "1" and suspect.labels["rank"] == "1"
    assert suspect.labels["pid"] == "815" and suspect.labels["job"] == "master:127.0.0.1:29512"
    host = "demo-h200x2-hang"  # the recorded node, as `gputui check --demo` names it
    gpu = [s for s in ss if s.name.startswith("gputui_gpu_")]
    assert gpu and all(s.labels["host"] == host and s.labels["uuid"] for s in gpu)
    spin = {s.labels["gpu"]: s.value for s in ss if s.name == "gputui_gpu_spin_seconds"}
    assert spin["0"] >= 10.0 and spin["1"] == 0.0

    e.proc.send_signal(signal.SIGTERM)
    assert e.proc.wait(timeout=10) == 0
    assert "stopped after" in e.proc.stderr.read().decode()


def test_sigint_ends_it_too(exporter):
    e = exporter("--demo")
    e.proc.send_signal(signal.SIGINT)
    assert e.proc.wait(timeout=10) == 0


# ---------------------------------------------------------------- bad input: one line, exit 2


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


def test_a_port_in_use_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_cli("exporter", "--demo", "--listen", f"127.0.0.1:{port}")
    assert f"cannot listen on 127.0.0.1:{port}: address already in use" in one_line_error(r)


@pytest.mark.parametrize(
    "listen, why",
    [
        ("9835", "expected ADDR:PORT"),
        ("127.0.0.1:http", "not a port number"),
        ("127.0.0.1:70000", "port out of range"),
        ("::1:9835", "in brackets"),
        (":9835", "expected ADDR:PORT"),
    ],
)
def test_a_bad_listen_address_is_one_line(listen, why):
    assert why in one_line_error(run_cli("exporter", "--demo", "--listen", listen))


def test_an_address_not_of_this_host_is_one_line():
    r = run_cli("exporter", "--demo", "--listen", "192.0.2.1:9835")  # TEST-NET-1
    assert "cannot listen on 192.0.2.1:9835" in one_line_error(r)


def test_without_prometheus_client_it_says_how_to_install_it():
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from gputui.cli import main; sys.exit(main(['exporter', '--demo']))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert one_line_error(r) == f"gputui: {NEEDS_CLIENT}\n"
    assert "pip install 'gputui[exporter]'" in NEEDS_CLIENT


@pytest.mark.parametrize(
    "args, why",
    [
        (["--loop"], "--loop needs --replay FILE or --demo"),
        (["--speed", "2"], "--speed and --start need"),
        (["--demo", "--stall-after", "30", "--hang-after", "10"], "--hang-after must be"),
        (["--replay", "/nonexistent.jsonl"], "no such file"),
    ],
)
def test_inconsistent_options_are_one_line(args, why):
    assert why in one_line_error(run_cli("exporter", *args))


@no_gpu_only
def test_live_without_a_gpu_has_nothing_to_export():
    assert "nothing to export" in one_line_error(run_cli("exporter"))


# ---------------------------------------------------------------- --loop


def test_a_looping_replay_goes_on_in_time_and_hangs_again():
    """Three passes over the demo's last hang: time never goes back, and the detector
    raises the hang once per pass, as Prometheus would see it on a demo left running."""
    from gputui.diagnose.hang.detector import Detector

    inner = ReplaySource.demo(start_s=100.0, realtime=False)  # rank_dies, then the end
    src = LoopingSource(inner)
    det, last_t, raised, was = Detector(), float("-inf"), 0, False
    per_pass = len(inner.snaps) - inner.pos
    for _ in range(3 * per_pass):
        snap = src.sample()
        assert snap.t > last_t
        last_t = snap.t
        alarm = det.update(snap).alarm
        raised += alarm and not was
        was = alarm
    assert src.passes == 3 and raised == 3


def test_the_cost_benchmark_parses_its_arguments():
    """bench/exporter_cost.py takes minutes; here only that it starts (see bench/)."""
    r = subprocess.run(
        [sys.executable, str(REPO / "bench" / "exporter_cost.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "--compare-cmd" in r.stdout and "--live" in r.stdout
