"""gputui in real terminals: tmux panes, `ssh -t` into them, ssh without a terminal, a pty
that goes away. What a person does on a GPU node, checked the way they would see it."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest
from sshd import sshd  # noqa: F401 - the fixture
from tmux import Tmux, needs_tmux

# The demo's stall_in_loop hang is raised ~25 s into the demo: start a few seconds before.
DEMO = ["-m", "gputui", "--demo", "--start", "6"]  # about 10 s before the first stop


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux(80, 24)
    yield t
    t.close()


def gputui_processes(marker: str) -> list[psutil.Process]:
    """Our own gputui processes, told apart by a marker argument."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "gputui" in cmd and marker in cmd:
            out.append(p)
    return out


def gone_within(marker: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while gputui_processes(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@needs_tmux
def test_over_ssh_t_into_tmux_at_80x24_the_stall_is_on_screen(tmux, sshd):  # noqa: F811
    tmux.start(sshd.argv(sys.executable, *DEMO, tty=True))
    screen = tmux.wait_for("STALLED", "SUSPECT", timeout=60)
    lines = screen.splitlines()
    assert any(" 1 H200" in ln and "SUSPECT" in ln for ln in lines), screen
    assert any(" 815 " in ln and "SUSP" in ln for ln in lines), screen
    tmux.keys("j", "p")
    # a replay: p shows the stack gputui recorded for rank 1 at the stall
    tmux.wait_for("recorded py-spy dump of pid 815", "<module> (worker2.py:37)", timeout=15)
    tmux.keys("Escape")
    tmux.wait_gone("recorded py-spy dump")
    tmux.keys("q")
    deadline = time.monotonic() + 10
    while not tmux.pane_dead():
        assert time.monotonic() < deadline, "q did not end gputui"
        time.sleep(0.05)


def test_ssh_without_a_terminal_says_why_and_leaves_nothing_running(sshd):  # noqa: F811
    marker = "9.8765"
    r = subprocess.run(
        sshd.argv(sys.executable, *DEMO, "--stall-after", marker),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "needs a terminal" in r.stderr and "ssh -t" in r.stderr
    assert "Traceback" not in r.stderr
    assert gone_within(marker, 2.0)


def test_piped_output_gets_one_line_not_escape_codes():
    r = subprocess.run(
        [sys.executable, *DEMO], stdin=subprocess.DEVNULL, capture_output=True, timeout=60
    )
    assert r.returncode == 2
    assert r.stdout == b"" and b"\x1b[" not in r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_a_pty_closed_under_gputui_ends_it_within_2_s():
    pid, fd = pty.fork()
    if pid == 0:  # the child: gputui on the pty's terminal
        os.execv(sys.executable, [sys.executable, *DEMO])
    try:
        seen, deadline = b"", time.monotonic() + 30
        while b"GPU" not in seen:
            assert time.monotonic() < deadline, f"no frame: {seen[-300:]!r}"
            if select.select([fd], [], [], 0.2)[0]:
                seen += os.read(fd, 65536)
        os.close(fd)  # the terminal goes away (ssh dropped, tmux pane killed)
        deadline = time.monotonic() + 2.0
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            assert time.monotonic() < deadline, "gputui still running 2 s after its pty closed"
            time.sleep(0.02)
    finally:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def process_rows(screen: str) -> list[str]:
    """The process table's rows: a flag or blank, then GPU, PID and RANK columns."""
    return [ln for ln in screen.splitlines() if re.match(r"^\S*\s+\d+\s+\d+\s+\d+\s", ln)]


@needs_tmux
def test_the_keys_people_know_work_in_a_real_terminal():
    t = Tmux(100, 30)
    try:
        t.start([sys.executable, *DEMO])
        t.wait_for("STALLED", timeout=60)
        for key, shows in (("F1", "gputui keys"), ("h", "gputui keys"), ("?", "gputui keys")):
            t.keys(key)
            t.wait_for(shows, "select the suspect rank")
            t.keys("Escape")
            t.wait_gone(shows)  # as a person does: see it close, then press the next key
        t.keys("t")
        t.wait_for("▾ job 127.0.0.1:29512", "├─ ", "└─ ")
        t.keys("t", "/")
        # Type once the prompt is open (on a busy machine a key sent sooner goes elsewhere).
        t.wait_for("filter: █")
        t.keys(*"rank1", "Enter")  # rank 1's process, whichever phase is playing
        t.wait(
            lambda s: "filter: rank1" in s and len(process_rows(s)) == 1,
            "only the filtered row is left",
        )
        t.keys("Escape")  # clears the applied filter
        t.wait(lambda s: "filter: rank1" not in s and len(process_rows(s)) == 2, "both rows")
        t.keys("I")
        t.wait_for("GPU▲")
        t.keys(">")
        t.wait_for("sorted by pid")
        t.keys("End", "Home", "NPage", "PPage")
        t.keys("e")
        t.wait_for("environment of pid", "world_size=")
        t.keys("Escape")
        t.wait_gone("environment of pid")
        t.keys("d")
        t.wait_for("verdict details")
        t.keys("Escape")
        t.wait_gone("verdict details")
        t.keys("k")
        t.wait_for("this is a replay")  # no signal to a recorded process
        t.keys("C-p")
        t.wait_for("Search for commands")  # the palette is open: the letters go into it
        t.keys(*"tree")
        t.wait_for("Tree view: jobs and their ranks")
        t.keys("Escape")
        t.wait_gone("Tree view: jobs and their ranks")
        t.keys("q")
        deadline = time.monotonic() + 10
        while not t.pane_dead():
            assert time.monotonic() < deadline, "q did not end gputui"
            time.sleep(0.05)
    finally:
        t.close()
