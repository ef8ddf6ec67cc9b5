"""A recording's lines, from disk: special files refused, gzip recognised, every line and
byte counted against the reader's bounds (gputui.collect.trace.schema), and a line's bytes
parsed as one JSON value within them (`parse_line`).

Why not plain json.loads for a line: a line of 100,000 brackets is a RecursionError inside
the parser, and a 5,000-digit integer costs quadratic time in int() (or an OverflowError
later in float()). Both are refused or defused before or during the parse, so a hostile line
costs one bounded pass and ends in one line naming the file and the line.

Split from gputui.collect.trace.read (which folds the lines into samples and re-exports
`iter_lines` and `shown`), so that each stays a module one can read at once; the rules are
in read's docstring.
"""

from __future__ import annotations

import errno
import gzip
import json
import math
import os
import re
import stat
import zlib
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

from gputui.collect.capped import nesting_ok
from gputui.collect.trace import schema
from gputui.errors import GputuiError

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_SPACE = b" \t\n\r\x0b\x0c"  # what bytes.strip() strips


def shown(path: str | Path) -> str:
    """The path as an error message shows it: on one line, whatever bytes it holds."""
    s = str(path)
    return s if s.isprintable() else ascii(s)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def _file_kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    for test, words in (
        (stat.S_ISREG, None),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return words
    return "not a regular file"


def open_untrusted(path: str | Path) -> IO[bytes]:
    """Open a recording for reading, refusing anything but a regular file, without blocking.

    O_NONBLOCK makes the open of a FIFO with no writer return at once; fstat on the open
    descriptor then says what was opened, so a file swapped between a check and the open
    cannot slip through.
    """
    name = shown(path)
    if str(path) == "":
        raise GputuiError("no recording named (empty file name)")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except ValueError:  # a NUL byte in the name
        raise GputuiError(f"{name}: not a valid file name") from None
    except OSError as e:
        if e.errno == errno.ENOENT:
            raise GputuiError(f"{name}: no such file") from None
        raise GputuiError(f"{name}: cannot open ({e.strerror or e})") from None
    try:
        kind = _file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise GputuiError(f"{name}: is {kind}, not a recording (give a regular file)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class _Lines:
    """Physical lines of a plain or gzip stream, each at most MAX_LINE_BYTES, counted."""

    def __init__(self, path: str | Path, raw: IO[bytes]) -> None:
        self.name = shown(path)
        self.raw = raw
        try:
            head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
        except OSError as e:  # /proc/PID/mem and a failing disk: EIO on the first read
            raise GputuiError(f"{self.name}: read failed ({e.strerror or e})") from None
        self.gzip = head == _GZIP_MAGIC
        if not self.gzip and str(path).endswith(".gz") and head:
            raise GputuiError(f"{self.name}: not a gzip file (the name ends in .gz)")
        self.f: IO[bytes] | gzip.GzipFile = (
            gzip.GzipFile(fileobj=raw, mode="rb") if self.gzip else raw
        )
        self.n = 0  # number of the last line read

    def where(self, n: int | None = None) -> str:
        return f"{self.name}:{self.n if n is None else n}"

    def numbered(self) -> Generator[tuple[bytes, bool, int], None, None]:
        """(line without its end, ended by a newline, its number) of every non-blank line.

        One loop with its names bound locally: it runs once per line of a day-long
        recording (200,000 lines), where each attribute look-up and call is paid again.
        A gzip stream cut short ends the file (its complete lines are kept)."""
        readline, limit = self.f.readline, schema.MAX_LINE_BYTES + 1
        n = total = blank = full = 0
        while True:
            try:
                line = readline(limit)
            except EOFError:
                return  # a gzip recording cut short, as by a kill: keep what came before
            except (OSError, zlib.error) as e:  # BadGzipFile is an OSError
                what = "not a readable gzip stream" if self.gzip else "read failed"
                raise GputuiError(f"{self.where(n + 1)}: {what} ({e})") from None
            if not line:
                return
            self.n = n = n + 1
            total += len(line)
            if total > schema.MAX_TOTAL_BYTES:
                raise GputuiError(
                    f"{self.where()}: more than {_size(schema.MAX_TOTAL_BYTES)} of data "
                    "(split long recordings into several files)"
                )
            ended = line.endswith(b"\n")
            if not ended and len(line) > schema.MAX_LINE_BYTES:
                raise GputuiError(
                    f"{self.where()}: line longer than {_size(schema.MAX_LINE_BYTES)} "
                    "(one line is one GPU of one sample)"
                )
            line = line.rstrip(b"\r\n")
            if n == 1 and line.startswith(_BOM):
                line = line[len(_BOM) :]
            if not line or (line[0] in _SPACE and not line.strip()):  # `{` starts a line
                blank += 1
                if blank > schema.MAX_BLANK_LINES:
                    raise GputuiError(
                        f"{self.where()}: more than {schema.MAX_BLANK_LINES} blank lines"
                    )
                continue
            full += 1
            if full > schema.MAX_LINES:
                raise GputuiError(f"{self.where()}: more than {schema.MAX_LINES} lines")
            yield line, ended, n

    def close(self) -> None:
        try:
            if self.gzip:
                self.f.close()
        finally:
            self.raw.close()


def text_line(data: bytes, where: str, limit: int, what: str) -> str:
    """One line of a text history file (nvidia-smi's CSV, dcgmi dmon's table) as text: a
    line over `limit` bytes or not UTF-8 is one clear error naming `where` it stands.

    Args:
        data: the line's bytes, without its newline.
        where: the file and line number, as errors name them.
        limit: the longest line the format allows, in bytes.
        what: the format's words for the error ("a CSV row", "dmon").

    Returns:
        The line, decoded.
    """
    if len(data) > limit:
        raise GputuiError(f"{where}: line longer than {limit} bytes for {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GputuiError(f"{where}: not UTF-8 text (byte {e.start})") from None


def iter_lines(path: str | Path) -> Generator[tuple[bytes, bool, int], None, None]:
    """(bytes, ended by a newline, line number) of every non-blank line of a recording,
    within the file's bounds (blank lines, lines, bytes: trace_schema). An error message
    names a line as `shown(path):N`, made only when one is raised (200,000 a day)."""
    raw = open_untrusted(path)
    try:
        lines = _Lines(path, raw)
    except BaseException:
        raw.close()
        raise
    try:
        yield from lines.numbered()
    except MemoryError:
        raise GputuiError(f"{lines.where()}: out of memory reading the recording") from None
    finally:
        lines.close()


# ---------------------------------------------------------------- a line as JSON

_MAX_INT_DIGITS = 24  # sign + 20 digits covers 2**64; longer integers cannot be a reading


def _parse_int(text: str) -> int | float:
    """Integers longer than any field allows become +-inf (an out-of-range value) instead of
    being converted: CPython's int() is quadratic in the digits, and float() of a 400-digit
    integer raises OverflowError."""
    if len(text) > _MAX_INT_DIGITS:
        return -math.inf if text.startswith("-") else math.inf
    return int(text)


_DECODER = json.JSONDecoder(parse_int=_parse_int)
_PLAIN = json.JSONDecoder()  # C-speed integers: for lines with no integer that long
_LONG_DIGITS = re.compile(rb"[0-9]{%d}" % (_MAX_INT_DIGITS + 1))


def parse_line(raw: bytes, where: str) -> Any:
    """One JSON value from one line's bytes (BOM and line end already removed)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GputuiError(f"{where}: not UTF-8 text (byte {e.start})") from None
    if not nesting_ok(raw, schema.MAX_DEPTH):
        raise GputuiError(f"{where}: JSON nested deeper than {schema.MAX_DEPTH} levels")
    decoder = _DECODER if _LONG_DIGITS.search(raw) else _PLAIN  # no 25-digit run: no long int
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as e:
        raise GputuiError(f"{where}: not a JSON line ({e.msg} at column {e.colno})") from None
    except (ValueError, RecursionError) as e:  # belt and braces: both are bounded above
        raise GputuiError(f"{where}: not a JSON line ({type(e).__name__})") from None
