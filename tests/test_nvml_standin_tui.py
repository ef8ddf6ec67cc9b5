"""The dashboard on a driver whose reads start to hang: STALE on screen, `q` still quits.

gputui runs in a real terminal (tmux, at 80x24 and 160x40) against the stand-in libnvidia-ml.so.1 in
`hang_read_after:N` mode: the first samples come, then every NVML read blocks for good. The
status line must say STALE within a few sample intervals, `q` must end the program, and no
gputui process may be left 2 s later (a thread stuck inside NVML must not hold the exit).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from nvml_standin.build import REPO, build_standin, standin_env

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

INTERVAL = 0.5


@pytest.fixture(scope="module")
def nvml_lib() -> Path:
    return build_standin()


class Tmux:
    """A tmux server of our own (its own socket), so nothing else's sessions are touched."""

    def __init__(self) -> None:
        self.socket = f"gputui-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str) -> str:
        # An explicit environment: without one, the C-level environ is passed, and under
        # pytest it holds COLUMNS=80 and LINES=24, which every program in the panes would
        # take as its size whatever the pane's size is.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        r = subprocess.run(
            [TMUX or "tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=10,
            env=env,
        )
        assert r.returncode == 0, (args, r.stderr)
        return r.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "t")

    def kill(self) -> None:
        subprocess.run(
            [TMUX or "tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10
        )


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux()
    yield t
    t.kill()


def wait_for_screen(tmux: Tmux, text: str, timeout: float) -> str | None:
    """Poll the pane (bounded) until `text` is on it; the screen, or None if it never is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = tmux.screen()
        if text in screen:
            return screen
        time.sleep(0.1)
    return None


def gone_within(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 40), id="160x40")]


@pytest.mark.parametrize("size", SIZES)
def test_reads_that_hang_show_stale_and_q_still_quits(nvml_lib, tmux, size):
    env = standin_env(nvml_lib, "hang_read_after:6")  # 3 samples of 2 GPUs, then no answer
    tag = uuid.uuid4().hex
    env_args = [
        f"-e{k}={env[k]}" for k in ("LD_LIBRARY_PATH", "GPUTUI_STANDIN_NVML", "PYTHONUNBUFFERED")
    ]
    argv = [sys.executable, "-m", "gputui", "--interval", str(INTERVAL), "--no-mouse"]
    tmux(
        "new-session", "-d", "-s", "t", "-x", str(size[0]), "-y", str(size[1]), "-c", str(REPO),
        *env_args, f"-eGPUTUI_TEST_TAG={tag}", "--", *argv,
    )  # fmt: skip
    pid = int(tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip())
    assert wait_for_screen(tmux, "H200", timeout=60), tmux.screen()  # samples came
    # STALE once no sample has come for 3 intervals + 2 s (3.5 s): well within 10 s.
    stale = wait_for_screen(tmux, "STALE", timeout=10)
    last_screen = tmux.screen()
    tmux("send-keys", "-t", "t", "q")
    assert gone_within(pid, 2.0), f"gputui (pid {pid}) still running 2 s after q"
    left = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("GPUTUI_TEST_TAG") == tag:
                left.append(p.pid)
        except psutil.Error:
            continue
    assert left == []
    assert stale is not None, f"STALE not on screen within 10 s:\n{last_screen}"
    assert "H200" in stale  # the last readings stay on screen, marked stale


def test_q_quits_at_once_even_when_nvml_shutdown_would_never_return(nvml_lib, tmux):
    env = standin_env(nvml_lib, "hang_shutdown")
    argv = [sys.executable, "-m", "gputui", "--interval", str(INTERVAL), "--no-mouse"]
    tmux(
        "new-session", "-d", "-s", "t", "-x", "160", "-y", "40", "-c", str(REPO),
        f"-eLD_LIBRARY_PATH={env['LD_LIBRARY_PATH']}", "-eGPUTUI_STANDIN_NVML=hang_shutdown",
        "--", *argv,
    )  # fmt: skip
    pid = int(tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip())
    assert wait_for_screen(tmux, "H200", timeout=60), tmux.screen()
    tmux("send-keys", "-t", "t", "q")
    assert gone_within(pid, 2.0), f"gputui (pid {pid}) still running 2 s after q"
