"""Standard output that cannot be written: one line on stderr and exit 2, never a traceback.

`gputui ... >&-` (closed), `>/dev/full` (full) and `1</dev/null` (read-only) made every
command trace back, or worse: with fd 1 closed, Python sets `sys.stdout` to None, `print`
drops everything silently, and the next file gputui opens becomes fd 1. `guard()` runs
first: a closed fd 1 is taken by /dev/null (so no file of ours lands there) and
`sys.stdout` becomes a stream whose every write fails, like a read-only one. `why()` tells
an OSError that came from stdout (a flush of it fails too) from any other, which stays a
bug to see. A broken pipe is handled by the caller (quiet: the reader chose to stop).
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import Any


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
    of stdout is then told from any other OSError exactly, whatever the buffer kept."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.failed: OSError | None = None

    def write(self, s: str) -> int:
        try:
            return int(self._inner.write(s))
        except OSError as e:
            self.failed = e
            raise

    def flush(self) -> None:
        try:
            self._inner.flush()
        except OSError as e:
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
    if sys.stdout is not None:
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
