"""One line of a recording as one JSON value, within the bounds (schema): UTF-8, nesting at
most schema.MAX_DEPTH deep, and no integer long enough to make the parser slow.

Why not plain json.loads: a line of 100,000 brackets is a RecursionError inside the parser,
and a 5,000-digit integer costs quadratic time in int() (or an OverflowError later in
float()). Both are refused or defused here, before or during the parse, so a hostile line
costs one bounded pass and ends in one line naming the file and the line.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from gputui.collect.capped import nesting_ok
from gputui.collect.trace import schema
from gputui.errors import GputuiError

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
