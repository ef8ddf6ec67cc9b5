"""The `gputui` command's entry point: Ctrl-C during start-up ends it quietly, with 130.

Why a module of its own: the first tens of milliseconds of every command are imports
(argparse, the command's modules, psutil, Textual...). Python's own SIGINT handler raises
KeyboardInterrupt wherever the interpreter happens to be, and inside an import that is a
traceback of importlib's frames, printed to a person who only pressed Ctrl-C (issue 34: 9
of 9 early interrupts). Nothing has been read or written yet, so the right answer is to
leave at once: until the command is parsed and about to run, SIGINT exits with status 130
(128 + SIGINT, what a shell reports) and prints nothing. gputui.cli puts Python's handler
back just before the command runs, so the commands' own Ctrl-C handling (check reports
what it saw, record keeps every complete sample) is unchanged.

This module imports only `os`, `signal` and `sys`, which the interpreter has loaded before
any of gputui's code runs. It is not imported by `gputui.cli` itself, so a program (or a
test) that imports the CLI keeps its own SIGINT handler.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

INTERRUPTED = 130  # 128 + SIGINT


def _leave(signum: int, frame: FrameType | None) -> None:
    """SIGINT before the command runs: nothing to save, nothing to say."""
    os._exit(INTERRUPTED)


def early_interrupt_is_installed() -> bool:
    """Whether SIGINT still means "leave at once" (gputui.cli asks, to put Python's back)."""
    return signal.getsignal(signal.SIGINT) is _leave


def main() -> int:
    # Only over Python's own handler: a SIGINT ignored by whoever started gputui (`nohup`, a
    # background job of a script) stays ignored.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            signal.signal(signal.SIGINT, _leave)
        except (ValueError, OSError):  # not the main thread: nothing to do
            pass
    try:
        from gputui.cli import main as run

        return run()
    except KeyboardInterrupt:  # a SIGINT that came between handlers
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
