"""Reading a small file of unknown origin with a size cap, and JSON from it with a depth cap.

`@FILE` host lists, reports and other inputs are named by the user but may be anything:
`@/dev/zero` grew `merge --expect` and `fleet` past 10 GB before this cap, a FIFO with no
writer blocks an open forever, and `/proc/PID/mem` fails a read with EIO. Here a read
stops one byte past the cap and says so in one line; the open never blocks; and every
OSError becomes a one-line ValueError the commands turn into exit 2.

`loads_bounded` parses one JSON text refusing what would blow up inside the parser or
after it: nesting deeper than a cap (a 100,000-deep line is a RecursionError), integers
longer than any reading (a 5,000-digit number hits CPython's int conversion limit, and
int() is quadratic below it), and non-finite numbers. `nesting_ok` is that depth check on
raw bytes, without recursion; the recording reader (collect.trace) applies it to every line.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

MAX_DEPTH = 64  # a `check --json` report nests about 6 deep
MAX_INT_DIGITS = 24  # sign and 20 digits hold 2**64

_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_PAIR = re.compile(rb"\[\]|\{\}")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_ok(raw: bytes, limit: int) -> bool:
    """False when brackets outside strings nest deeper than `limit`, checked without
    recursion: strip strings, keep only brackets, then peel innermost pairs `limit` times.
    Unbalanced input returns True; the JSON parser reports it."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return True  # cannot nest deeper than it has brackets: the usual line ends here
    s = _STRINGS.sub(b"", raw).translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        if not s:
            return True
        peeled = _PAIR.sub(b"", s)
        if len(peeled) == len(s):
            return True  # unbalanced: not JSON
        s = peeled
    return not s


def read_capped(path: str, cap: int) -> bytes:
    """At most `cap` bytes of `path`; ValueError (one line) when larger or unreadable."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except ValueError:
        raise ValueError(f"{path!r}: not a valid file name") from None
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}") from None
    try:
        os.set_blocking(fd, True)  # a FIFO that had a writer at open: read it as a file
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise ValueError(f"{path}: read failed ({e.strerror or e})") from None
    finally:
        os.close(fd)
    if size > cap:
        raise ValueError(f"{path}: larger than {_size(cap)} (is it the right file?)")
    return b"".join(chunks)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"a number out of range ({text[:20]})")
    return v


def _constant(text: str) -> float:
    raise ValueError(f"{text} is not a number JSON allows")


_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


def loads_bounded(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """One JSON value; ValueError with a short reason for anything malformed or hostile.

    Args:
        text: the JSON text, from a file or a line that may be hostile.
        max_depth: how deeply arrays and objects may nest before the text is refused.

    Returns:
        The decoded value (dict, list, str, number, bool or None).

    Raises:
        ValueError: malformed JSON, or nesting deeper than `max_depth`.
    """
    if not nesting_ok(text.encode("utf-8", "surrogatepass"), max_depth):
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {max_depth} levels") from None
