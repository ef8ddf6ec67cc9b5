"""The plain-text first frame drawn before Textual loads (gputui.ui.widgets.preframe).

It must show the header and one line per GPU from the first sample, sanitized; draw only on
a terminal and only once; and never leave the terminal on the alternate screen: Textual takes
that screen over and leaves it at its exit, and when the dashboard does not start, `leave()`
goes back to the normal screen.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

from tmux import Tmux, needs_tmux

from gputui.collect.model import GpuSample, Snapshot
from gputui.ui.widgets.preframe import ENTER, LEAVE, PreFrame, lines


def two_gpus(name: str = "NVIDIA H200") -> Snapshot:
    gpus = tuple(
        GpuSample(
            index=i, name=name, util=98.0, mem_util=31.0, power_w=690.0, power_limit_w=700.0,
            mem_used_mb=70_000.0, mem_total_mb=143_771.0, temp_c=61.0,
        )
        for i in range(2)
    )  # fmt: skip
    return Snapshot(t=0.0, gpus=gpus, processes=(), jobs=(), hostname="node-7")


def test_the_frame_is_the_header_and_one_line_per_gpu_with_its_power():
    out = lines(two_gpus(), "live NVML, 2 GPU(s)", 160, 50)
    assert out[0].startswith("gputui · node-7 · live NVML, 2 GPU(s)")
    assert len(out) == 3
    for i, ln in enumerate(out[1:]):
        assert ln.startswith(f" {i} NVIDIA H200") and "690/700W 99%" in ln and "util  98%" in ln


def test_a_hostile_gpu_name_is_shown_escaped_and_lines_fit_the_terminal():
    out = lines(two_gpus("\x1b[2J\x1b]0;pwned\x07H200"), "live", 40, 3)
    assert all("\x1b" not in ln and "\x07" not in ln for ln in out)
    assert all(len(ln) <= 40 for ln in out)
    assert len(out) == 2, "a 3-row terminal: the header and the GPU line that fits"


def test_without_gpus_it_says_why():
    snap = Snapshot(t=0.0, gpus=(), processes=(), jobs=(), gpu_error="NVML: Driver Not Loaded")
    assert lines(snap, "host processes only", 80, 24)[1] == " No GPUs: NVML: Driver Not Loaded"


def test_on_a_terminal_it_draws_once_on_the_alternate_screen_and_leave_goes_back():
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            pre = PreFrame(tty, is_terminal=lambda: True)
            assert pre.draw(two_gpus(), "live")
            assert not pre.draw(two_gpus(), "live"), "drawn once only"
            first = os.read(master, 65536).decode()
            assert first.startswith(ENTER) and "690/700W" in first
            pre.leave()
            assert os.read(master, 65536).decode() == LEAVE
            assert not pre.draw(two_gpus(), "live"), "nothing after leave()"
    finally:
        os.close(master)
        os.close(slave)


def test_it_draws_nothing_off_a_terminal_or_once_textual_has_the_screen():
    out = io.StringIO()
    pre = PreFrame(out, is_terminal=lambda: False)
    assert not pre.draw(two_gpus(), "live")
    pre.leave()
    assert out.getvalue() == "", "never drawn: nothing to undo"
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            pre = PreFrame(tty, is_terminal=lambda: True)
            pre.close()  # Textual starts
            assert not pre.draw(two_gpus(), "live")
    finally:
        os.close(master)
        os.close(slave)


@needs_tmux
def test_after_q_nothing_of_the_dashboard_is_left_on_the_shell_screen():
    """The pre-frame is on the alternate screen that Textual takes over and leaves."""
    tmux = Tmux(100, 30)
    try:
        tmux.start([sys.executable, "-m", "gputui", "--demo", "--no-mouse"])
        tmux.wait_for("demo", "H200", timeout=60)
        tmux.keys("q")
        tmux.wait(lambda _s: tmux.pane_dead(), "gputui ended", timeout=20)
        screen = tmux.screen()
        assert "loading…" not in screen and "H200" not in screen, screen
    finally:
        tmux.close()


def test_the_gpus_are_drawn_before_textual_is_imported():
    """Importing Textual holds the GIL against the thread that opens NVML and takes the first
    sample: the dashboard waits (bounded) for that plain-text frame before it imports Textual.
    Run in a fresh interpreter; off a terminal the start then stops at the terminal check.
    The wait's bound is raised for the test: what is tested is the order (frame, then
    Textual), and on a loaded box the demo's first sample can take longer than the 1 s bound."""
    code = (
        "import sys\n"
        "import gputui.commands.app\n"
        "gputui.commands.app.PREFRAME_WAIT_S = 60.0\n"
        "from gputui.ui.widgets import preframe\n"
        "seen = []\n"
        "preframe.PreFrame.active = property(lambda self: True)\n"
        "preframe.PreFrame.draw = lambda self, snap, d: seen.append('textual' in sys.modules)\n"
        "from gputui.cli import main\n"
        "rc = main(['--demo'])\n"
        "print('drawn with textual imported:', seen, 'rc', rc)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert "drawn with textual imported: [False] rc 2" in r.stdout, (r.stdout, r.stderr)
    assert "needs a terminal" in r.stderr
