"""Running gputui in-process on hostile input: captured output, a watchdog, no traceback lost.

`run_main` calls `gputui.cli.main(argv)` in this thread (commands may install signal
handlers, which only the main thread can) with stdout and stderr captured, and a SIGALRM
watchdog that turns a hang into a reported failure instead of a stuck test run. Any
exception that escapes `main` is reported as a traceback, as a user would have seen it.
"""

from __future__ import annotations

import contextlib
import io
import signal
import time
import traceback
from dataclasses import dataclass
from types import FrameType

from gputui.cli import main


class Hung(BaseException):
    """Raised by the watchdog; a BaseException so `except Exception` in gputui cannot eat it."""


@dataclass(frozen=True)
class Run:
    rc: int | None
    out: str
    err: str
    seconds: float
    hung: bool


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hung()


def run_main(argv: list[str], bound: float = 15.0) -> Run:
    """`gputui ARGV` in-process, stopped after `bound` seconds (then `hung` is True).

    pytest-timeout's own SIGALRM timer is saved and put back, shortened by the time spent.
    """
    out, err = io.StringIO(), io.StringIO()
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    old_left, _ = signal.setitimer(signal.ITIMER_REAL, bound)
    start = time.monotonic()
    rc: int | None = None
    hung = False
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    except SystemExit as e:  # argparse errors
        rc = e.code if isinstance(e.code, int) else 2
    except Hung:
        hung = True
    except BaseException:  # noqa: BLE001 - what a user would see as a traceback
        err.write("Traceback (most recent call last):\n" + traceback.format_exc())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        spent = time.monotonic() - start
        if old_left > 0:
            signal.setitimer(signal.ITIMER_REAL, max(0.001, old_left - spent))
    return Run(rc, out.getvalue(), err.getvalue(), spent, hung)
