"""Ctrl-C during `dump --gdb`: gdb has detached and the target runs before gputui exits.

gdb runs in its own session (so a Ctrl-C meant for gputui does not kill it mid-attach), so
gputui must stop it itself: SIGTERM (gdb detaches), then SIGKILL, then a SIGCONT if the
attach left a SIGSTOP behind. The test interrupts gputui while gdb holds a real target and
reads the target's /proc state the moment gputui has exited.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO
from test_hostile_startup import as_a_terminal_starts_it

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def _wait_traced(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if _status(pid).get("TracerPid", "0").strip() != "0":
            return True
        time.sleep(0.005)  # the poll's pace; the bound is the deadline
    return False


@pytest.mark.parametrize("attempt", range(3))
def test_ctrl_c_during_dump_gdb_leaves_the_target_running_and_untraced(attempt):
    target = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile True:\n    time.sleep(0.01)\n"]
    )
    try:
        gputui = subprocess.Popen(
            [sys.executable, "-m", "gputui", "dump", "--gdb", str(target.pid)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=as_a_terminal_starts_it,
        )
        if not _wait_traced(target.pid, 30):
            gputui.kill()
            gputui.wait(timeout=30)
            pytest.skip("gdb never attached here (ptrace not allowed?)")
        gputui.send_signal(signal.SIGINT)  # as Ctrl-C does, to gputui only
        gputui.wait(timeout=30)
        status = _status(target.pid)  # at once: no grace for a gdb still detaching
        assert status["TracerPid"].strip() == "0", status
        assert status["State"][0] not in "tT", status
        assert b"Traceback" not in gputui.stderr.read()  # type: ignore[union-attr]
        assert gputui.returncode == 130
    finally:
        target.kill()
        target.wait(timeout=10)
