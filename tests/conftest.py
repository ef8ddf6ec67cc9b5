"""Shared fixtures: the bundled demo recording, and real child processes to inspect."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.collect.source import demo_path
from gputui.collect.trace.format import read_trace

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


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, and never handed to another test of this run.

    Tests run side by side (pytest-xdist), so a random port may be another test's: the
    kernel picks one that is not bound. But a port is bound late by a job that imports
    torch first: meanwhile the kernel may give it to a second test, and two jobs then
    share one master address (seen: a world of 2 and a world of 3 read as one job). So
    the ports given out are written to a file of this run, under a lock, and a port
    given before is not given again."""
    import fcntl
    import socket
    import tempfile

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
    ledger = Path(tempfile.gettempdir()) / f"gputui-test-ports-{run}"
    with open(ledger, "a+") as book:
        fcntl.flock(book, fcntl.LOCK_EX)
        book.seek(0)
        given = set(book.read().split())
        for _ in range(100):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if str(port) not in given:
                book.write(f"{port}\n")
                return port
    raise AssertionError("no port free on 127.0.0.1 that this run has not given out")


def end_launcher(agent: subprocess.Popen) -> None:
    """SIGKILL a launcher (torchrun) and every process under it, and reap them.

    torchrun starts each rank in a session of its own (torch's subprocess handler), so
    killing the launcher's process group leaves its ranks alive, reparented to init: a rank
    left sleeping is then a stuck torchelastic job (its store gone) for ten minutes, and every
    live check on the host rightly reports it (the way-out test's dashboard named that job
    instead of its own). The descendants are taken before the launcher goes."""
    import signal

    import psutil

    try:
        kids = psutil.Process(agent.pid).children(recursive=True) if agent.poll() is None else []
    except psutil.Error:
        kids = []
    if agent.poll() is None:
        try:
            os.killpg(agent.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for k in kids:
        try:
            k.kill()
        except psutil.Error:
            pass
    agent.wait(timeout=30)
    psutil.wait_procs(kids, timeout=30)


def _has_gpu() -> bool:
    from gputui.collect.nvml.reader import NvmlReader

    r = NvmlReader()
    r.close()
    return bool(r.devices)


HAS_GPU = _has_gpu()
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU path; this machine has GPUs")

# torch is optional (the probe's extra): the README's test command passes without it, with a
# CPU build and with the CUDA build `pip install '.[probe]'` takes. A test (or a fixture)
# that starts torch ranks carries `@pytest.mark.torch` (or `needs_torch`): without torch it
# is skipped at collection with the reason, before any rank is started and waited for.
# .ci/run runs `-m torch` once more in a venv without torch (tests/test_torch_gating.py
# checks that every test module that starts torch ranks is gated).
HAS_TORCH = importlib.util.find_spec("torch") is not None
NO_TORCH = "torch is not installed (pip install 'gputui[probe]')"
needs_torch = pytest.mark.torch

RAS_ABSENT = "NCCL RAS did not answer: nothing listens on localhost:28028."


def maps_nccl(pids: list[int]) -> bool:
    """Whether any of `pids` has libnccl mapped (a CUDA build of torch loads it at import)."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                if "libnccl" in f.read():
                    return True
        except OSError:
            continue
    return False


def beside_ras(findings: tuple[str, ...], pids: list[int]) -> tuple[str, ...]:
    """`findings` without RAS's "did not answer" where it is true and expected: ranks of a
    CUDA torch build map libnccl even on gloo, so gputui asks NCCL RAS, and nothing listens
    here. With a CPU build the ranks have no NCCL and the line must not be there at all."""
    if not maps_nccl(pids):
        return findings
    return tuple(f for f in findings if f != RAS_ABSENT)


# Modules that check what gputui does where torch is missing (the probe's install hint, the
# gating itself, the flight recorder's pipes): marked `torchless`. .ci/run runs
# `-m "torch or torchless"` in its venv without torch (Python 3.10), the README's command in
# the no-torch setting for every test whose answer depends on torch, at a fraction of a second
# run of the whole suite.
TORCHLESS_MODULES = {"test_probe_cli", "test_cli_first_hour", "test_torch_gating", "test_flightrec"}


# Modules whose tests drive external programs end to end (a real Prometheus, sshd and ssh,
# tmux, a wheel build, torch jobs, the stand-in driver in many subprocesses). They test those
# programs with gputui, not the Python version: .ci/run runs them on the main Python only.
SLOW_MODULES = {
    "test_blamed_probe",
    "test_debugserver_live",
    "test_exporter_prometheus",
    "test_terminal",
    "test_packaging",
    "test_nvml_standin",
    "test_nvml_standin_tui",
    "test_nvlink_standin",
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
    "test_hostile_exporter",
    "test_hostile_stdout",
    "test_rendezvous",
    "test_mismatch_headline",
    "test_straggler_app",
    "test_straggler_cli",
    "test_health_standin",
    "test_fleet_kubectl",
    "test_evidence_early",
    "test_watch_live",
    "test_ui_escapes",
    "test_busy_live",
    "test_early_live",
    "test_host_blame_probe",
}


# Modules that drive the dashboard through Textual's Pilot: they test the app and Textual, not
# the interpreter, so .ci/run runs them on the main Python only (`-m "not pilot"` on 3.10,
# where the unit tests run at a lower priority beside the main run).
PILOT_MODULES = {
    "test_app", "test_app_actions", "test_blamed_probe", "test_core_key", "test_demo_story",
    "test_health_faces", "test_hostile_tui", "test_host_blame_key",
    "test_lastwords_replay", "test_no_gpu", "test_probe_screen", "test_process_table",
    "test_replay_keys", "test_secrets_corpus", "test_straggler_app", "test_tool_pane",
    "test_way_out", "test_world_screen", "test_ui_escapes",
}  # fmt: skip


# Under pytest-xdist (the README's `-n`; `--dist loadgroup` in pyproject's addopts) the
# suite's wall time is set by its longest tests, which mostly wait (for Prometheus to fire, a
# tmux pane, a hung stand-in driver, torch ranks). They are handed out first so that they
# overlap with everything else: seconds per module, run alone on the 2-core CI box.
LONGEST_FIRST = {
    "test_exporter_prometheus": 60,
    "test_nvml_standin": 57,
    "test_nvlink_standin": 51,
    "test_terminal": 53,
    "test_probe": 30,
    "test_flightrec": 16,
    "test_multi_rank": 15,
    "test_nvml_standin_tui": 12,
    "test_watch_live": 12,
    "test_busy_live": 130,
    "test_early_live": 16,
    "test_fleet": 10,
    "test_hostile_corpus": 8,
    "test_secrets_corpus": 8,
    "test_app": 7,
    "test_tools": 7,
    "test_probe_screen": 6,
    "test_packaging": 5,
    "test_health_standin": 50,
    "test_world_probe": 48,
    "test_host_blame_probe": 30,
    "test_rendezvous": 40,
    "test_mismatch_headline": 30,
    "test_straggler_app": 20,
    "test_hostile_stdout": 20,
    "test_hostile_exporter": 20,
    "test_straggler_cli": 15,
    "test_evidence_early": 10,
    "test_lastwords_live": 10,
    "test_fleet_kubectl": 10,
    "test_ui_escapes": 45,
    "test_blamed_probe": 25,
    "test_debugserver_live": 20,
    "test_debugserver_parse": 11,
    "test_prom_history": 30,
    "test_prom_servers": 10,
}
# Modules whose module-scoped fixture is costly (a torch job, an sshd, compiled targets): one
# worker runs all their tests, so the fixture starts once.
ONE_WORKER = {
    "test_debugserver_live",
    "test_flightrec",
    "test_multi_rank",
    "test_fleet",
    "test_secrets_corpus",
    "test_prom_history",  # one Prometheus (backfilled) for the module
}
# Modules that look at the whole machine's process table (the world probe's tests check that
# no worker is left on any "host"): run on one worker together, so that one test never sees
# another's workers.
SHARED_GROUPS = {"test_world_probe": "world", "test_world_screen": "world"}
SHARED_GROUPS |= {"test_host_blame_probe": "world", "test_host_blame_key": "world"}
# ... and the rendezvous tests, which run a live `gputui check` on the host, with the module
# whose rank jobs (ranks missing from a local world, one that cannot be dumped) such a check
# rightly calls a rendezvous hang: beside each other, the check would name the other's job.
SHARED_GROUPS |= {"test_rendezvous": "host_ranks", "test_watch_live": "host_ranks"}
SHARED_GROUPS |= {"test_bundle_replays": "host_ranks"}  # its two ranks, on the stand-in NVML
# A live `check` over the whole host, as the rendezvous tests run (their rank jobs would be
# its verdict), and ranks with rank variables that such a check would look at.
SHARED_GROUPS |= {"test_busy_live": "host_ranks", "test_early_live": "host_ranks"}


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


# tryfirst: xdist's own hook (in each worker) turns the xdist_group marks into the node ids'
# "@group" suffix that --dist loadgroup schedules by; it must see the marks added here.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        name = _module(item)
        gated = any(
            str(m.kwargs.get("reason", "")).startswith("torch is not installed")
            for m in item.iter_markers("skipif")
        )
        if gated and item.get_closest_marker("torch") is None:
            item.add_marker(pytest.mark.torch)  # an older module's own skipif: -m torch too
        if not HAS_TORCH and item.get_closest_marker("torch") is not None:
            item.add_marker(pytest.mark.skip(reason=NO_TORCH))
        if name in TORCHLESS_MODULES:
            item.add_marker(pytest.mark.torchless)
        if name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        if name in PILOT_MODULES:
            item.add_marker(pytest.mark.pilot)
        if name in ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(name))
        elif name in SHARED_GROUPS:
            item.add_marker(pytest.mark.xdist_group(SHARED_GROUPS[name]))
    # Stable: within a module, and among the quick ones, the order stays as written.
    items.sort(key=lambda item: -LONGEST_FIRST.get(_module(item), 0))
