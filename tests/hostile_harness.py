"""Running gputui on hostile input, and judging what it did.

`run_main` calls `gputui.cli.main(argv)` in this thread (commands may install signal
handlers, which only the main thread can) with stdout and stderr captured, and a SIGALRM
watchdog that turns a hang into a reported failure instead of a stuck test run. Any
exception that escapes `main` is reported as a traceback, as a user would have seen it.

`judge` says what a run of a corpus case came to: a clean error (exit 2, one line), a
clean run, or a failure (hang, traceback, invalid JSON, an error that is not one line, a
file accepted that should be refused or the reverse).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import time
import traceback
from dataclasses import dataclass
from types import FrameType

from hostile_corpus import ERROR, OK, Case

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
    # Like a real stdout: UTF-8, strict, so a lone surrogate that would crash `print` on a
    # terminal fails here too (a StringIO would accept it).
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="\n")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    # argparse looks up message catalogs through gettext at every add_argument, which is
    # most of an in-process run; with LANGUAGE=C it does not (messages are the same).
    language = os.environ.get("LANGUAGE")
    os.environ["LANGUAGE"] = "C"
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
        if language is None:
            del os.environ["LANGUAGE"]
        else:
            os.environ["LANGUAGE"] = language
        spent = time.monotonic() - start
        if old_left > 0:
            signal.setitimer(signal.ITIMER_REAL, max(0.001, old_left - spent))
    return Run(rc, _text(out), _text(err), spent, hung)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]


# ---------------------------------------------------------------- judging a run

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("snapshot",),
    ("snapshot", "--json"),
    ("check",),
    ("check", "--json"),
)


def _no_constants(name: str) -> object:
    raise ValueError(f"not JSON: {name}")


def json_problem(cmd: tuple[str, ...], out: str) -> str | None:
    """Why stdout of a --json run is not valid JSON (NaN and Infinity refused), or None."""
    if "--json" not in cmd or not out.strip():
        return None
    try:
        if cmd[0] == "check":
            for line in out.splitlines():
                json.loads(line, parse_constant=_no_constants)
        else:
            json.loads(out, parse_constant=_no_constants)
    except ValueError as e:
        return f"invalid JSON on stdout: {e}"
    return None


def raw_control(text: str) -> str | None:
    """The first control character a text output lets through raw (a newline ends a line
    and is fine), with what is around it; None when the text is safe for a terminal."""
    from gputui.textsafe import clean

    for line in text.split("\n"):
        if clean(line) != line:
            return f"raw control character in {line[:120]!r}"
    return None


def judge(
    case: Case, cmd: tuple[str, ...], rc: int | None, out: str, err: str, hung: bool
) -> tuple[str, str]:
    """(outcome, detail): outcome is "clean error", "clean run" or a failure:
    "hang", "crash", "traceback", "bad exit", "invalid JSON", "bad error line", "wrong
    outcome"."""
    if hung:
        return "hang", "ran past its bound"
    if rc == 5:  # gputui.diagnose.exitcodes.CRASH: a bug, said in one line
        return "crash", err.strip().splitlines()[-1] if err.strip() else "exit 5"
    if "Traceback (most recent call last)" in err or rc not in (0, 1, 2):
        return "traceback", err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
    if "--json" not in cmd and (raw := raw_control(out + err)):
        return "raw escape", raw
    bad_json = json_problem(cmd, out)
    if bad_json:
        return "invalid JSON", bad_json
    if rc == 2:
        lines = err.splitlines()
        if len(lines) != 1 or not lines[0].startswith("gputui: "):
            return "bad error line", repr(err[:200])
        if case.expect == OK:
            return "wrong outcome", f"refused a file it should accept: {lines[0][:200]}"
        return "clean error", lines[0]
    if case.expect == ERROR:
        return "wrong outcome", f"accepted a file it should refuse (exit {rc})"
    return "clean run", f"exit {rc}"


FAILURES = (
    "hang",
    "crash",
    "traceback",
    "raw escape",
    "bad exit",
    "invalid JSON",
    "bad error line",
    "wrong outcome",
)
