"""Start-up and crashes (issue 34): Ctrl-C in the first tens of milliseconds of a command is
quiet (exit 130, no traceback), and a bug exits with its own code (5, not 1 or 2) and one
line that names it.

The interrupts are real SIGINTs to a real `gputui` process, run through the console script
pip wrote (its entry point is gputui.entry). Where they land is made certain, not left to a
timer: a small import hook in the child sends the SIGINT to its own process at the moment
a given module is imported (gputui.cli, argparse, the command's module, psutil...). A second
test uses a pipe handshake: the child says when gputui's code has started importing, and
the parent interrupts it 0 to 40 ms later.

The interpreter's own start-up (site.py, before any of gputui's code runs) is Python's and
not covered: docs/hostile.md says so.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_harness import run_main

from gputui.diagnose import exitcodes

pytestmark = pytest.mark.hostile

SCRIPT = Path(sys.executable).with_name("gputui")
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="no gputui console script here")

# The child: run the console script with an import hook that interrupts its own process when
# TARGET is imported (or, when HANDSHAKE is a file descriptor, writes one byte to it then).
CHILD = r"""
import importlib.abc, os, runpy, signal, sys
target, handshake, script, *args = sys.argv[1:]

class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target_=None):
        if name == target:
            sys.meta_path.remove(self)
            if handshake != "-":
                os.write(int(handshake), b"r")
            else:
                os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = [script, *args]
runpy.run_path(script, run_name="__main__")
"""

COMMANDS = {
    "snapshot": ["snapshot", "--demo"],
    "check": ["check", "--demo", "--json"],
    "merge": ["merge", os.devnull],
    "fleet": ["fleet", "--launcher", "local", "localhost", "--", "snapshot", "--demo"],
    "dashboard": ["--demo"],
}
# Modules imported on the way: before the parser (gputui.cli), while it is built (argparse,
# the commands' modules), and once the command runs (what it imports lazily).
MODULES = {
    "snapshot": ["gputui.cli", "argparse", "gputui.commands.snapshot", "gputui.collect.trace.read"],
    "check": [
        "gputui.cli",
        "gputui.commands.check",
        "gputui.watch.watcher",
        "gputui.diagnose.hang.detector",
    ],
    "merge": ["gputui.cli", "gputui.commands.merge", "gputui.collect.report_reader"],
    "fleet": ["gputui.cli", "argparse", "gputui.commands.fleet"],
    "dashboard": ["gputui.cli", "gputui.commands.app", "gputui.ui.widgets.preframe"],
}


def as_a_terminal_starts_it() -> None:
    """SIGINT at its default, as a shell in a terminal starts a command: a test run started in
    the background (`pytest &`, a CI runner without job control) hands its children SIGINT
    ignored, and gputui rightly keeps an ignored SIGINT ignored (the nohup test below)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run_child(
    target: str, args: list[str], handshake: bool = False, delay: float = 0.0
) -> subprocess.CompletedProcess[bytes]:
    read_fd, write_fd = os.pipe()
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, target, str(write_fd) if handshake else "-", str(SCRIPT)]
        + args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(write_fd,) if handshake else (),
        preexec_fn=as_a_terminal_starts_it,
    )
    os.close(write_fd)
    try:
        if handshake:
            ready, _, _ = select.select([read_fd], [], [], 60)
            assert ready and os.read(read_fd, 1) == b"r", "the child never reached gputui's code"
            time.sleep(delay)  # where the interrupt lands, not a wait for something to happen
            p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        os.close(read_fd)
        if p.poll() is None:
            p.kill()
            p.wait()
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


@needs_script
@pytest.mark.parametrize(
    ("command", "module"), [(c, m) for c, ms in MODULES.items() for m in ms], ids=str
)
def test_ctrl_c_while_a_command_imports_exits_130_without_a_traceback(command, module):
    r = _run_child(module, COMMANDS[command])
    assert b"Traceback" not in r.stderr and b"KeyboardInterrupt" not in r.stderr, r.stderr
    assert r.returncode == 130, (r.returncode, r.stderr)


@needs_script
@pytest.mark.parametrize("ms", [0, 2, 5, 10, 20, 40])
def test_ctrl_c_in_the_first_40_ms_of_gputuis_code_is_quiet(ms):
    r = _run_child("gputui.cli", COMMANDS["snapshot"], handshake=True, delay=ms / 1000)
    assert b"Traceback" not in r.stderr and b"KeyboardInterrupt" not in r.stderr, r.stderr
    assert r.returncode in (130, 0), (r.returncode, r.stderr)  # 0: it had already finished


@needs_script
def test_an_ignored_sigint_stays_ignored():
    """`nohup gputui ...`: whoever started gputui ignores SIGINT; gputui must not undo it."""
    p = subprocess.Popen(
        [str(SCRIPT), "merge", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        p.send_signal(signal.SIGINT)  # ignored whenever it lands
        out, err = p.communicate(b'{"t": 1, "state": "ok", "host": "a"}\n', timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert b"final: ok" in out


# ---------------------------------------------------------------- a crash


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("boom")


CRASH_AT = {  # a function each command calls, made to fail as a bug would
    "check": ("gputui.watch.watcher.Watcher.update", ["check", "--demo"]),
    "merge": ("gputui.diagnose.merge.join.merge", ["merge", "LINES"]),
    "fleet": ("gputui.commands.fleet.run", ["fleet", "a", "--", "check"]),
    "snapshot": ("gputui.commands.snapshot.snapshot_to_text", ["snapshot", "--demo"]),
    "dump": ("gputui.commands.dump.run", ["dump", "1"]),
}


@pytest.mark.parametrize("command", sorted(CRASH_AT))
def test_a_bug_exits_5_with_one_line_naming_it(command, monkeypatch, tmp_path):
    import importlib

    where, argv = CRASH_AT[command]
    lines = tmp_path / "a.jsonl"
    lines.write_text('{"t": 1, "state": "ok", "host": "a"}\n')
    argv = [str(lines) if a == "LINES" else a for a in argv]
    module, attr = where.rsplit(".", 1)
    try:
        owner = importlib.import_module(module)
    except ModuleNotFoundError:  # a class: module.Class.method
        module, cls = module.rsplit(".", 1)
        owner = getattr(importlib.import_module(module), cls)
    monkeypatch.setattr(owner, attr, _boom)
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # noqa: SIM115 - closed by pytest
    monkeypatch.delenv("GPUTUI_DEBUG", raising=False)
    r = run_main(argv, bound=60)
    assert r.rc == exitcodes.CRASH == 5, (r.rc, r.err)
    assert r.err.count("\n") == 1 and "Traceback" not in r.err, r.err
    assert r.err.startswith(f"gputui: internal error in {command}: RuntimeError: boom at gputui/")
    assert "please report it (GPUTUI_DEBUG=1 shows the traceback)" in r.err


def test_gputui_debug_shows_the_crashs_traceback(monkeypatch, tmp_path):
    import gputui.diagnose.merge.join

    lines = tmp_path / "a.jsonl"
    lines.write_text('{"t": 1, "state": "ok", "host": "a"}\n')
    monkeypatch.setattr(gputui.diagnose.merge.join, "merge", _boom)
    monkeypatch.setenv("GPUTUI_DEBUG", "1")
    r = run_main(["merge", str(lines)], bound=60)
    assert r.rc == 5
    assert "Traceback (most recent call last)" in r.err and "RuntimeError: boom" in r.err
    assert r.err.rstrip().splitlines()[-1].startswith("gputui: internal error in merge")


def test_every_help_ends_with_the_crash_code():
    from gputui.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a.choices, dict))
    for name, p in [("gputui", parser), *sub.choices.items()]:
        text = p.format_help()
        assert "\n  5  gputui itself failed: a bug" in text, name
    assert "\n  1  a hang" in sub.choices["merge"].format_help()
