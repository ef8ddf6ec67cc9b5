"""Read `check --json` lines from files or standard input, bounded, for `gputui merge`.

Input comes from pipelines (`srun ... gputui check --json | gputui merge`, pdsh, kubectl),
so it may carry a launcher's prefix (`node-17: {...}`) or stray lines; those are taken or
counted as skipped, never fatal. gzip is recognised by its magic bytes, so a compressed
stream on standard input works too. Bounded like the recording reader: a line longer than
MAX_LINE or a total past MAX_TOTAL is an error, not a memory blow-up.
"""

from __future__ import annotations

import gzip
import io
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gputui.collect.capped import loads_bounded
from gputui.collect.hostlist import host_from_name
from gputui.collect.trace.read import shown
from gputui.errors import GputuiError
from gputui.textsafe import clean

MAX_LINE = 1 << 20
MAX_TOTAL = 1 << 30
# As the recording reader (gputui.collect.trace.schema.MAX_BLANK_LINES): a gzip of 1 GiB of
# newlines is 4.7 MB, and `yes '' | gputui merge -` never ends; neither holds a check line,
# so past this many blank (or other non-JSON) lines the input is refused, in well under a
# second, instead of read for minutes (or forever).
MAX_BLANK = 100_000
MAX_SKIPPED = 100_000
MAX_LINES = 1_000_000  # check lines: a day of 64 nodes' changes is far fewer


@dataclass
class ReadStats:
    lines: int = 0
    skipped: int = 0
    examples: list[str] = field(default_factory=list)  # where the first skipped lines were
    where: str = ""  # FILE:LINE of the line last yielded, for the caller's own skips

    def skip(self, why: str | None = None, where: str | None = None) -> None:
        """Count a skipped line; the first few are named (with why, when known)."""
        self.skipped += 1
        if len(self.examples) < 3:
            at = self.where if where is None else where
            self.examples.append(f"{at}: {clean(why, limit=160)}" if why else at)


def _binary(name: str) -> IO[bytes]:
    if name == "-":
        return sys.stdin.buffer
    p = Path(name)
    if p.is_dir():
        raise GputuiError(f"{name}: is a directory")
    try:
        return open(p, "rb")
    except OSError as e:
        raise GputuiError(f"{name}: {e.strerror or e}") from None


def _text(raw: IO[bytes]) -> IO[bytes] | gzip.GzipFile:
    """The stream, gunzipped when it starts with gzip's magic bytes."""
    if isinstance(raw, io.BufferedReader):
        buffered = raw
    elif isinstance(raw, (io.RawIOBase, io.BufferedIOBase)):
        buffered = io.BufferedReader(raw)  # peek() below needs a buffer
    else:
        raise GputuiError(f"{raw!r}: not a readable byte stream")
    if buffered.peek(2)[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=buffered)
    return buffered


def read_reports(names: list[str], stats: ReadStats) -> Iterator[tuple[str, dict[str, Any]]]:
    """(default host, parsed object) for every JSON line of every input."""
    total = blank = 0
    for name in names or ["-"]:
        default = "stdin" if name == "-" else host_from_name(name)
        raw = _binary(name)
        try:
            stream = _text(raw)
            n = 0
            while True:
                line = stream.readline(MAX_LINE + 1)
                if not line:
                    break
                n += 1
                total += len(line)
                if len(line) > MAX_LINE:
                    raise GputuiError(f"{name}:{n}: line longer than {MAX_LINE >> 20} MiB")
                if total > MAX_TOTAL:
                    raise GputuiError(f"input larger than {MAX_TOTAL >> 30} GiB")
                text = line.decode("utf-8", errors="replace").strip()
                if not text:
                    blank += 1
                    if blank > MAX_BLANK:
                        raise GputuiError(f"{shown(name)}:{n}: more than {MAX_BLANK} blank lines")
                    continue
                host = default
                if not text.startswith("{") and ": {" in text:  # pdsh's "host: " prefix
                    host, _, text = text.partition(": ")
                    host = host.strip() or default
                try:
                    obj = loads_bounded(text)  # too deep, 5,000 digits: skipped, not a crash
                except ValueError:
                    obj = None
                if not isinstance(obj, dict):
                    stats.skip(where=f"{shown(name)}:{n}")
                    if stats.skipped > MAX_SKIPPED:
                        raise GputuiError(
                            f"{shown(name)}:{n}: more than {MAX_SKIPPED} lines that are not "
                            "`gputui check --json` output"
                        )
                    continue
                stats.lines += 1
                if stats.lines > MAX_LINES:
                    raise GputuiError(f"{shown(name)}:{n}: more than {MAX_LINES} JSON lines")
                stats.where = f"{shown(name)}:{n}"
                yield host, obj
        except (OSError, EOFError, zlib.error) as e:
            raise GputuiError(f"{name}: not readable ({e})") from None
        finally:
            if name != "-":
                raw.close()
