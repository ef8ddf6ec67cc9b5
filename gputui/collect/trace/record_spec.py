"""A small language for the shape of a JSON value, and the check of a value against it.

Why not a JSON-Schema library: the shapes here are few and fixed, a check must cost
microseconds per record (a recording holds up to 100,000 of them), and the answer must be one
short sentence naming the field (`jobs[0].here: a number, expected a list`), never a
traceback. Each spec's `problem(value)` returns that sentence, or None when the value fits.

The rules every spec follows:

- a field of an object that is missing or null is accepted unless the object lists it as
  required: the consumers read every field with `.get` and a default;
- keys an object does not name are accepted as they are (a newer gputui may add fields;
  nothing reads them);
- bounds are part of the shape: a string's length, a list's length, a number's range. A bool
  is never a number, NaN and the infinities are never numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any


def kind_of(v: Any) -> str:
    """What a JSON value is, in words, for a message."""
    return {
        bool: "a boolean",
        str: "a string",
        list: "a list",
        dict: "an object",
        type(None): "null",
        int: "a number",
        float: "a number",
    }.get(type(v), type(v).__name__)


def _at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _said(path: str, what: str) -> str:
    return f"{path}: {what}" if path else what


class Spec:
    """The shape of one JSON value."""

    expected = "a value"

    def problem(self, v: Any, path: str = "") -> str | None:
        raise NotImplementedError

    def _wrong(self, v: Any, path: str) -> str:
        return _said(path, f"{kind_of(v)}, expected {self.expected}")


class Str(Spec):
    """A string of at most `limit` characters, one of `choices` when given."""

    def __init__(self, limit: int = 4096, choices: tuple[str, ...] | None = None) -> None:
        self.limit, self.choices = limit, choices
        self.expected = "a string"

    def problem(self, v: Any, path: str = "") -> str | None:
        if type(v) is not str:
            return self._wrong(v, path)
        if len(v) > self.limit:
            return _said(path, f"a string longer than {self.limit} characters")
        if self.choices is not None and v not in self.choices:
            return _said(path, f"not one of {', '.join(self.choices)}")
        return None


class Num(Spec):
    """A finite number within lo..hi; an integer (a JSON number without a fraction, held as
    int) when `integral`."""

    def __init__(self, lo: float = -1e300, hi: float = 1e300, integral: bool = False) -> None:
        self.lo, self.hi, self.integral = lo, hi, integral
        self.expected = "an integer" if integral else "a number"

    def problem(self, v: Any, path: str = "") -> str | None:
        t = type(v)
        if t is int or (t is float and not self.integral):
            if t is float and not math.isfinite(v):
                return _said(path, "not a finite number")
            if not self.lo <= v <= self.hi:
                return _said(path, f"outside {self.lo:g}..{self.hi:g}")
            return None
        return self._wrong(v, path)


def Int(lo: int = 0, hi: int = 2**63) -> Num:  # noqa: N802 - reads as a type in the tables
    return Num(lo, hi, integral=True)


class Bool(Spec):
    expected = "true or false"

    def problem(self, v: Any, path: str = "") -> str | None:
        return None if type(v) is bool else self._wrong(v, path)


class Anything(Spec):
    """Any JSON value (its depth and size are bounded by the line's own bounds): for a field
    no consumer reads, or one every consumer reads with str() only."""

    def problem(self, v: Any, path: str = "") -> str | None:
        return None


class OneOf(Spec):
    """The first of `specs` that fits."""

    def __init__(self, *specs: Spec) -> None:
        self.specs = specs
        self.expected = " or ".join(s.expected for s in specs)

    def problem(self, v: Any, path: str = "") -> str | None:
        if any(s.problem(v) is None for s in self.specs):
            return None
        return self._wrong(v, path)


class List(Spec):
    """A list of at most `limit` items, each of `of`."""

    def __init__(self, of: Spec, limit: int) -> None:
        self.of, self.limit = of, limit
        self.expected = "a list"

    def problem(self, v: Any, path: str = "") -> str | None:
        if type(v) is not list:
            return self._wrong(v, path)
        if len(v) > self.limit:
            return _said(path, f"a list of {len(v)} items, more than {self.limit}")
        for i, x in enumerate(v):
            if (why := self.of.problem(x, _at(path, i))) is not None:
                return why
        return None


class Tuple(Spec):
    """A list of exactly len(specs) items, each of its spec (a frame, a kernel line)."""

    def __init__(self, *specs: Spec) -> None:
        self.specs = specs
        self.expected = f"a list of {len(specs)}"

    def problem(self, v: Any, path: str = "") -> str | None:
        if type(v) is not list or len(v) != len(self.specs):
            return self._wrong(v, path)
        for i, (x, s) in enumerate(zip(v, self.specs, strict=True)):
            if x is not None and (why := s.problem(x, _at(path, i))) is not None:
                return why
        return None


class Obj(Spec):
    """An object whose named fields have these shapes (missing or null is fine, unless the
    field is in `required`); other keys are accepted."""

    def __init__(self, fields: dict[str, Spec], required: tuple[str, ...] = ()) -> None:
        self.fields, self.required = fields, required
        self.expected = "an object"

    def problem(self, v: Any, path: str = "") -> str | None:
        if type(v) is not dict:
            return self._wrong(v, path)
        for key in self.required:
            if v.get(key) is None:
                return _said(_at(path, key), "missing")
        for key, spec in self.fields.items():
            x = v.get(key)
            if x is not None and (why := spec.problem(x, _at(path, key))) is not None:
                return why
        return None


class Map(Spec):
    """An object of at most `limit` entries, keys matching `keys`, values of `of`."""

    def __init__(self, of: Spec, limit: int, keys: str = r".{0,256}") -> None:
        self.of, self.limit, self.keys = of, limit, re.compile(keys, re.S)
        self.expected = "an object"

    def problem(self, v: Any, path: str = "") -> str | None:
        if type(v) is not dict:
            return self._wrong(v, path)
        if len(v) > self.limit:
            return _said(path, f"an object of {len(v)} entries, more than {self.limit}")
        for k, x in v.items():
            if not self.keys.fullmatch(k):
                return _said(path, "an object with a key of the wrong form")
            if (why := self.of.problem(x, _at(path, "<key>"))) is not None:
                return why
        return None


class Parsed(Spec):
    """A value a model of its own parses (a RAS answer, a stack dump's ranks): it fits when
    the parser accepts it. The parser's message (ValueError) is the reason; any other
    exception it raises on a value of the wrong shape counts as a refusal too."""

    def __init__(self, parse: Callable[[Any], object], expected: str) -> None:
        self.parse = parse
        self.expected = expected

    def problem(self, v: Any, path: str = "") -> str | None:
        try:
            self.parse(v)
        except ValueError as e:
            return _said(path, str(e)[:120] or f"not {self.expected}")
        except (TypeError, KeyError, AttributeError, IndexError, OverflowError):
            return _said(path, f"not {self.expected}")
        return None
