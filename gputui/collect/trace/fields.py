"""The check of one field of a recorded line: its JSON type, its range, its text.

The rule (schema's docstring says it whole): a value of the wrong JSON type is an error naming
the file, the line and the field; a number of the right type that cannot be true for its
field is N/A, with the reason kept (`reading`, `in_range`); a string is bounded and made
printable. The GPU line (gpu_line) and the typed records (record_schema) are built from
these checks, so every reader of a recording says a bad field in the same words.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeGuard

from gputui.collect.trace import schema
from gputui.collect.trace.record_spec import kind_of
from gputui.errors import GputuiError


def printable(s: str) -> str:
    """`s` with every non-printable character (controls, lone surrogates...) as U+FFFD."""
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else "\ufffd" for c in s)


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(v: Any) -> Any:
    """`v` (a typed record's body) with every lone surrogate in its strings as U+FFFD: a
    JSON escape such as \\ud800 decodes to one, and no UTF-8 output can print it. Other
    characters stay (a log tail keeps its line breaks; the faces escape controls)."""
    if isinstance(v, str):
        return v if v.isascii() else _SURROGATE.sub("\ufffd", v)
    if isinstance(v, list):
        return [without_surrogates(x) for x in v]
    if isinstance(v, dict):
        return {without_surrogates(k): without_surrogates(x) for k, x in v.items()}
    return v


def text(d: dict[str, Any], key: str, where: str, limit: int = schema.MAX_STR_CHARS) -> str | None:
    """An optional string field: None, or a string of at most `limit` characters."""
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise GputuiError(f"{where}: '{key}' is {kind_of(v)}, expected a string")
    if len(v) > limit:
        raise GputuiError(f"{where}: '{key}' is longer than {limit} characters")
    return printable(v)


def is_number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def number(v: Any, key: str, where: str) -> int | float | None:
    """A value that must be a JSON number or null (a bool or a string is an error)."""
    if v is None or is_number(v):
        return v
    raise GputuiError(f"{where}: '{key}' is {kind_of(v)}, expected a number")


def in_range(v: int | float, lo: float, hi: float, integral: bool = False) -> str | None:
    """Why `v` cannot be a reading of a field with this range, or None when it can."""
    if isinstance(v, float) and not math.isfinite(v):
        return f"recorded value is not a finite number ({v})"
    if not lo <= v <= hi:
        shown = f"{v:.6g}" if isinstance(v, float) else str(v)
        return f"recorded value {shown} is outside {lo:g}..{hi:g}"
    if integral and isinstance(v, float) and not v.is_integer():
        return f"recorded value {v:g} is not a whole number"
    return None


def reading(
    d: dict[str, Any], key: str, where: str, lo: float, hi: float, integral: bool = False
) -> tuple[float | int | None, str | None]:
    """(value, None) for a valid reading, (None, reason) for one out of range."""
    v = d.get(key)
    kind = type(v)
    # The usual case, checked first: an int or float (exactly: a bool is neither) in range.
    # NaN fails the comparison and takes the long way.
    if (kind is int or kind is float) and lo <= v <= hi:  # type: ignore[operator]
        if not integral:
            return float(v), None  # type: ignore[arg-type]
        if kind is int:
            return v, None
    v = number(v, key, where)
    if v is None:
        return None, None
    why = in_range(v, lo, hi, integral)
    if why is not None:
        return None, why
    return (int(v) if integral else float(v)), None


def sample_time(v: Any, where: str) -> float:
    """`t`: required, a number within 0..T_MAX (a plausible Unix time)."""
    if not is_number(v):
        raise GputuiError(f"{where}: missing or non-numeric 't'")
    if in_range(v, 0, schema.T_MAX) is not None:
        raise GputuiError(f"{where}: 't' is not a plausible Unix time (0..{schema.T_MAX:.0f})")
    return float(v)


def gpu_index(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= schema.MAX_GPU_INDEX:
        raise GputuiError(f"{where}: missing or invalid 'gpu' index (0..{schema.MAX_GPU_INDEX})")
    return v


def pid(v: Any, key: str, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= schema.PID_MAX_LIMIT:
        raise GputuiError(
            f"{where}: '{key}' holds {kind_of(v)} that is not a pid (1..{schema.PID_MAX_LIMIT})"
        )
    return v


def bounded_list(d: dict[str, Any], key: str, where: str, limit: int) -> list[Any]:
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise GputuiError(f"{where}: '{key}' is {kind_of(v)}, expected a list")
    if len(v) > limit:
        raise GputuiError(f"{where}: '{key}' has {len(v)} entries, more than {limit}")
    return v
