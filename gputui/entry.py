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

The handler is installed when this module is imported, which the console script and
`python -m gputui` do first of all; it imports only modules the interpreter has loaded
before any of gputui's code runs (`os`, `sys`, the C `_signal`). It is not imported by
`gputui.cli` itself, so a program (or a test) that imports the CLI keeps its own SIGINT
handler.
"""

from __future__ import annotations

# The interpreter's own C module, loaded before any of gputui's code: `import signal` builds
# its enums in Python, milliseconds in which a Ctrl-C would still be a traceback.
import _signal
import os
import sys

INTERRUPTED = 130  # 128 + SIGINT


def _leave(signum: int, frame: object) -> None:
    """SIGINT before the command runs: nothing to save, nothing to say."""
    os._exit(INTERRUPTED)


def early_interrupt_is_installed() -> bool:
    """Whether SIGINT still means "leave at once" (gputui.cli asks, to put Python's back)."""
    return _signal.getsignal(_signal.SIGINT) is _leave


def _install() -> None:
    # Only over Python's own handler: a SIGINT ignored by whoever started gputui (`nohup`, a
    # background job of a script) stays ignored.
    now = _signal.getsignal(_signal.SIGINT)
    if now is _signal.default_int_handler or getattr(now, "gputui_early", False):
        try:
            _signal.signal(_signal.SIGINT, _leave)
        except (ValueError, OSError):  # not the main thread: nothing to do
            pass


_install()  # at import: the console script and `python -m gputui` import this module first


def main() -> int:
    try:
        from gputui.cli import main as run

        return run()
    except KeyboardInterrupt:  # a SIGINT that came between handlers
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
