"""A block of plain GPU lines decoded by msgspec into typed lines, checked as they decode.

Why: reading a history file is parsing JSON and then checking every field against the
full reader's rules (gputui.collect.trace.schema). msgspec (the `history` extra) does both
in one pass in C when it is told the line's type: each reading a number in its range or
null, the time and GPU index present and in range, `pids` an array of at most
MAX_PROCS_PER_GPU pids in range, the strings bounded. A line that breaks a rule is not
clean, and the caller (gputui.collect.trace.plain_lines) leaves the file to the full
reader, which has the words. Measured on 200,000 lines: parse and check 0.4-0.5 CPU s,
where orjson's parse and the column checks took 1.1-1.2 (BENCHMARKS.md section 21).

Each line is decoded alone (`map` of the decoder over the block, in C): a file whose lines
were joined into one array could hide a line that is not one object behind its neighbour.
What msgspec reads differently from `json`: NaN, Infinity, lone surrogates and invalid
UTF-8 are errors (the full reader reads the file), an integer past 64 bits is read whole
and then out of every range; duplicate keys keep the last, trailing spaces pass, as in json.
"""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter, is_not
from typing import Annotated, Any

import msgspec

from gputui.collect.trace import schema

__all__ = ["KEYS", "columns"]

KEYS = schema.PLAIN_KEYS  # the columns given, in order (plain_lines reads them by position)

_REFUSED = ("type", "procs", "proc_mem")  # a typed record, processes: not plain lines
_INT64 = 2**63 - 1  # msgspec's bounds stop here; a larger bound is checked after
_M = msgspec.Meta


def _reading(lo: float, hi: float, integral: bool) -> Any:
    meta = _M(ge=lo, le=hi) if hi <= _INT64 else _M(ge=lo)
    return Annotated[int if integral else float, meta] | None


_PID = Annotated[int, _M(ge=1, le=schema.PID_MAX_LIMIT)]
_TEXT = Annotated[str, _M(max_length=schema.MAX_STR_CHARS)] | None
_Line = msgspec.defstruct(
    "_Line",
    [
        ("t", Annotated[float, _M(ge=0, le=schema.T_MAX)]),
        ("gpu", Annotated[int, _M(ge=0, le=schema.MAX_GPU_INDEX)]),
        *((key, _reading(lo, hi, whole), None) for key, _a, lo, hi, whole in schema.GPU_READINGS),
        ("pids", Annotated[tuple[_PID, ...], _M(max_length=schema.MAX_PROCS_PER_GPU)] | None, None),
        *((key, _TEXT, None) for key in ("name", "uuid", "phase")),
        *((key, Any, msgspec.UNSET) for key in _REFUSED),
    ],
)
_DECODE = msgspec.json.Decoder(_Line).decode
_LARGE = [  # readings whose bound msgspec cannot hold (the events bitmask): (column, bound)
    (KEYS.index(key), hi) for key, _a, _lo, hi, _w in schema.GPU_READINGS if hi > _INT64
]


def columns(block: list[bytes]) -> list[list[Any]]:
    """The block's lines as columns, one list per key of KEYS, every value checked.

    Args:
        block: lines, each one JSON object (the caller checked they start with `{`).

    Returns:
        One list per key of KEYS, in order; a reading or field absent is None.

    Raises:
        ValueError: a line that is not clean (msgspec's error, or a refused key).
    """
    try:
        lines = list(map(_DECODE, block))
    except msgspec.MsgspecError as e:
        raise ValueError(str(e)) from None
    for key in _REFUSED:
        if any(map(is_not, map(attrgetter(key), lines), repeat(msgspec.UNSET))):
            raise ValueError(f"a line with `{key}`")
    cols = [list(map(attrgetter(key), lines)) for key in KEYS]
    for k, hi in _LARGE:
        col = cols[k]
        vals = [v for v in col if v is not None] if None in col else col
        if vals and max(vals) > hi:
            raise ValueError(f"`{KEYS[k]}` out of range")
    return cols
