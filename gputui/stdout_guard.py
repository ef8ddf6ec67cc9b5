"""Standard output that cannot be written: one line on stderr and exit 2, never a traceback.

`gputui ... >&-` (closed), `>/dev/full` (full) and `1</dev/null` (read-only) made every
command trace back, or worse: with fd 1 closed, Python sets `sys.stdout` to None, `print`
drops everything silently, and the next file gputui opens becomes fd 1. `guard()` runs
first: a closed fd 1 is taken by /dev/null (so no file of ours lands there) and
`sys.stdout` becomes a stream whose every write fails, like a read-only one. `why()` tells
an OSError that came from stdout (a flush of it fails too) from any other, which stays a
bug to see.

A reader that stops reading (`gputui check --json | head -1`) is not an error, and it does not
change the answer: the first write that finds the pipe's reader gone points fd 1 at /dev/null,
and the command runs to its end and exits with its own status (check's verdict: 1 for a hang),
as it would have with a reader to the end. A broken pipe whose reader is still there is some
other pipe, and is raised (a bug to see).

A stdout that cannot encode every character (`PYTHONIOENCODING=ascii`, `LC_ALL=C` with
`PYTHONUTF8=0`) gets ASCII stand-ins for the few symbols gputui writes ("·", "…", "→") and "?"
for any other character, never a UnicodeEncodeError that ends a verdict as a crash.
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import select
import sys
from typing import Any

# What an ASCII stdout shows for the symbols gputui's text uses (anything else becomes "?").
_ASCII = {
    "\u00b7": "-", "\u2026": "...", "\u2192": "->", "\u2190": "<-", "\u2014": "-",
    "\u2013": "-", "\u00d7": "x", "\u2265": ">=", "\u2264": "<=", "\u2248": "~",
    "\u00b5": "u", "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
    "\u2191": "^", "\u2193": "v", "\u25b2": "^", "\u25bc": "v", "\u2713": "ok",
    "\u2717": "x", "\u00b0": " deg", "\u2022": "*",
}  # fmt: skip
_ERRORS = "gputui-ascii"


def _stand_in(e: UnicodeError) -> tuple[str, int]:
    """codecs error handler: a readable stand-in for what the stream cannot encode."""
    if not isinstance(e, UnicodeEncodeError):
        raise e
    bad = e.object[e.start : e.end]
    return "".join(_ASCII.get(c, "?") for c in bad), e.end


codecs.register_error(_ERRORS, _stand_in)


def _encodable(stream: Any) -> None:
    """A text stream whose encoding lacks "…" writes stand-ins instead of raising."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        "\u2026\u00b7".encode(encoding)
        return
    except (UnicodeError, LookupError):
        pass
    try:
        stream.reconfigure(errors=_ERRORS)
    except (AttributeError, ValueError, OSError):  # not a TextIOWrapper: leave it
        pass


def reader_gone(fd: int = 1) -> bool:
    """The write end of a pipe (or socket) whose reader has closed polls as an error."""
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError):
        return False


def to_devnull(fd: int = 1) -> None:
    """What `fd` still receives goes to /dev/null from now on."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass


class _Closed(io.TextIOBase):
    """What `sys.stdout` is when fd 1 was closed: every write fails with EBADF."""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")

    def flush(self) -> None:
        raise OSError(errno.EBADF, "standard output is closed")

    def fileno(self) -> int:
        return 1


class _Watched:
    """sys.stdout as it was, remembering the OSError its write or flush raised: a failure
    of stdout is then told from any other OSError exactly, whatever the buffer kept. A
    reader gone is not a failure: later output goes to /dev/null (`gone` says so)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.failed: OSError | None = None
        self.gone = False

    def _reader_left(self, e: OSError) -> bool:
        if not isinstance(e, BrokenPipeError):
            return False
        try:
            fd = self._inner.fileno()
        except (OSError, ValueError, AttributeError):
            return False
        if not reader_gone(fd):
            return False  # some other pipe: a bug, raised
        to_devnull(fd)
        self.gone = True
        try:
            self._inner.flush()  # what the buffer kept, now into /dev/null
        except (OSError, ValueError):
            pass
        return True

    def write(self, s: str) -> int:
        try:
            return int(self._inner.write(s))
        except OSError as e:
            if self._reader_left(e):
                return len(s)
            self.failed = e
            raise

    def flush(self) -> None:
        try:
            self._inner.flush()
        except OSError as e:
            if self._reader_left(e):
                return
            self.failed = e
            raise
        if self.failed is not None:  # a write failed and was swallowed (argparse does)
            raise self.failed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def guard() -> None:
    """Before anything runs: stdout watched for failures; a closed one becomes /dev/null at
    fd 1 plus a stream whose every write fails."""
    if isinstance(sys.stdout, (_Watched, _Closed)):
        return
    if sys.stderr is not None:
        _encodable(sys.stderr)
    if sys.stdout is not None:
        _encodable(sys.stdout)
        sys.stdout = _Watched(sys.stdout)  # type: ignore[assignment]
        return
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        if fd != 1:
            os.dup2(fd, 1)
            os.close(fd)
    except OSError:
        pass
    sys.stdout = _Closed()


def unguard() -> None:
    """sys.stdout as it was before guard() (for callers that run main in-process)."""
    if isinstance(sys.stdout, _Watched):
        sys.stdout = sys.stdout._inner
    elif isinstance(sys.stdout, _Closed):  # fd 1 is /dev/null now: the exit flush is quiet
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115


def why(e: OSError) -> str | None:
    """One line when `e` is stdout failing (closed, full, read-only, EIO), else None."""
    out = sys.stdout
    if isinstance(out, _Closed):
        return "cannot write to standard output: it is closed"
    if isinstance(out, _Watched) and out.failed is not None:
        f = out.failed
        return f"cannot write to standard output: {f.strerror or f}"
    return None
