"""A GPU line read again: one whose bytes equal a checked line's but for its readings.

Why: in a recording, a GPU's line of one sample is byte-for-byte its line of the sample
before, but for a few numbers (the time, util, power, memory, a process's CPU and RSS): the
process list, the command lines, the rank variables and the GPU's name repeat for hours.
Parsing and checking all of it again for each of 200,000 lines made a day-long replay cost
50 us a line (issue 34). A line that the full reader (gputui.collect.trace.schema) has
checked becomes a *template*: its bytes with those readings cut out, as a regular
expression whose other bytes must match exactly, and the checked row it gave. A later line
that matches the template is the template's line with other numbers in the same places, so
only those numbers are read (float()) and range-checked; the row is the template's with
them put in.

What keeps this exactly as safe as the full reader:

- **Only byte-identical text is reused.** Outside the reading slots, every byte of the line
  must equal the template's: same keys, same strings, same structure, so the same checks
  would pass with the same results (strings made printable, command lines redacted, rank
  variables read).
- **A slot only takes what JSON reads the same way.** It matches a plain JSON number (no
  sign, no leading zero, at most 15 integer digits), which JSON reads as an int or a float
  whose float() is the value the full reader keeps (a reading is kept as a float). NaN,
  Infinity, a minus sign, a string, a bool or null in a slot do not match: the full reader
  reads that line, with its own words for what is wrong.
- **Anything unusual takes the full reader.** A slot value outside its field's range (which
  the full reader turns into N/A), a line with no template, a template whose readings were
  N/A, a line of more than MAX_TEMPLATE_BYTES: all read as before, error for error.

Slots may be `t`, the GPU's float readings (not `pstate` and `events`, whose whole numbers
stay literal: a change is a new template) and each listed process's `cpu`, `rss_mb` and
`gpu_mem_mb`; pids, indices, `create_time` and `proc_mem` stay literal. A GPU's first
template slots `t` alone; a line that misses it is read in full and learned again, its
template slotting the readings that moved since (make_template), so after a few lines a
GPU's template parses what changes from sample to sample and compares the rest as bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from operator import itemgetter, le
from typing import Any

from gputui.collect.model import GpuSample, ProcessInfo
from gputui.collect.trace import schema
from gputui.collect.trace.gpu_line import GpuRow
from gputui.collect.trace.lines import parse_line

MAX_TEMPLATE_BYTES = 64 << 10
"""Lines longer than this are not learned: a template is a compiled pattern of the line's
bytes, and a recording's usual GPU line is about 1 KiB (many processes: a few KiB)."""

TEMPLATES_PER_GPU = 4
"""Templates kept per GPU, newest first: a process whose state flips between running and
sleeping makes two; a fifth evicts the oldest."""

# A JSON string (skipped whole, escapes and all) or a number outside strings (group 1).
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)')
# What a slot accepts: a JSON number that float() reads as JSON would (no sign: -0 is 0 to
# JSON's int but -0.0 to float(); 15 digits: every such integer is exact as a float).
_SLOT = rb"((?:0|[1-9][0-9]{0,14})(?:\.[0-9]+)?(?:[eE][-+]?[0-9]{1,3})?)"
_GPU_KEY = b'"gpu":'
_SENTINEL = "\ue000"  # a private-use character: marks a number's place in the probe

# File key -> (GpuSample attribute, low, high) of the readings that may be slots.
_GPU_SLOTS = {key: (attr, lo, hi) for key, attr, lo, hi, integral in schema.GPU_READINGS
              if not integral}  # fmt: skip
_PROC_SLOTS = schema.PROC_READINGS  # the full reader's ranges: one table
# A slot's pattern has no sign, so Template.row checks only the high end of a range: a range
# starting above 0 (`t`'s is 0) would need its low end checked too.
if any(lo > 0 for _attr, lo, _hi in (*_GPU_SLOTS.values(), *_PROC_SLOTS.values())):
    raise AssertionError("template.py: a slot range starts above 0; Template.row must check it")


class Template:
    """One checked line's bytes with slots where its readings were, and what it gave."""

    __slots__ = (
        "gpu_at",
        "his",
        "mem",
        "pattern",
        "phase",
        "proc_at",
        "procs",
        "slotted",
        "t_at",
        "texts",
    )

    def __init__(
        self,
        pattern: re.Pattern[bytes],
        row: GpuRow,
        slots: list[tuple],
        texts: dict[tuple[Any, ...], bytes],
        slotted: frozenset[tuple[Any, ...]],
    ) -> None:
        # Slots in line order, each ending in its range: ("t", lo, hi), ("gpu", attr, lo,
        # hi) or ("proc", pid, attr, lo, hi); a line's row is rebuilt from them (row).
        self.pattern = pattern
        self.texts = texts  # every number's text, by its path
        self.slotted = slotted  # the paths of the slots
        # A slot's pattern has no sign, so its value is >= 0: no low end is checked, every
        # range starting at or below 0 (checked at import, below _PROC_SLOTS).
        self.his = tuple(s[-1] for s in slots)
        self.t_at = next(k for k, s in enumerate(slots) if s[0] == "t")
        # (the checked GpuSample's fields, its slots' attributes, their values' picker)
        self.gpu_at = (
            row.gpu.__dict__,
            *_at([(k, s[1]) for k, s in enumerate(slots) if s[0] == "gpu"]),
        )
        self.phase = row.phase
        self.mem = row.mem
        self.procs = dict(row.procs)  # copied per line; those with slots replaced
        # (pid, the checked process's fields, its slots' attributes, their values' picker)
        # for each process with readings in slots
        by_pid: dict[int, list[tuple[int, str]]] = {}
        for k, s in enumerate(slots):
            if s[0] == "proc":
                by_pid.setdefault(s[1], []).append((k, s[2]))
        self.proc_at = [(pid, row.procs[pid].__dict__, *_at(at)) for pid, at in by_pid.items()]

    def row(self, raw: bytes) -> GpuRow | None:
        """The row of `raw`, or None when it does not match or a reading is out of range."""
        m = self.pattern.fullmatch(raw)
        if m is None:
            return None
        vals = list(map(float, m.groups()))
        if not all(map(le, vals, self.his)):
            return None  # the full reader says N/A (or, for `t`, an error)
        procs = self.procs.copy()
        for pid, fields, attrs, pick in self.proc_at:
            procs[pid] = _filled(ProcessInfo, fields, attrs, pick(vals))
        fields, attrs, pick = self.gpu_at
        gpu = _filled(GpuSample, fields, attrs, pick(vals))
        row = _new(GpuRow)  # a plain dataclass, its __init__ skipped: this is a dict
        row.__dict__ = {
            "t": vals[self.t_at],
            "gpu": gpu,
            "phase": self.phase,
            "procs": procs,
            "mem": self.mem,
            "source": self,
        }
        return row


# A row's GpuSample and ProcessInfo are copies of the template's with the slots' readings
# put in, made without running their __init__ (dataclasses.replace costs microseconds; this
# is a dict copy); only for the rows built here, before anyone else holds them.
_new, _set = object.__new__, object.__setattr__


def _filled(cls: type, fields: dict[str, Any], attrs: tuple[str, ...], values: Any) -> Any:
    """A `cls` (a frozen dataclass) with the checked line's `fields`, `attrs` set to `values`."""
    d = fields.copy()
    d.update(zip(attrs, values, strict=True))
    out: Any = _new(cls)
    _set(out, "__dict__", d)
    return out


def _at(slots: list[tuple[int, str]]) -> tuple[tuple[str, ...], Callable[[list[float]], Any]]:
    """(attributes, a function that picks their values from a line's slot values)."""
    attrs = tuple(a for _, a in slots)
    if not slots:
        return attrs, lambda vals: ()
    if len(slots) == 1:
        k = slots[0][0]
        return attrs, lambda vals: (vals[k],)
    return attrs, itemgetter(*(k for k, _ in slots))


class LineTemplates:
    """Templates of the GPU lines read so far, by the GPU index the line names."""

    def __init__(self) -> None:
        self._by_gpu: dict[bytes, list[Template]] = {}
        self._misses: dict[bytes, int] = {}  # consecutive misses: learning backs off
        self.hits = 0

    @staticmethod
    def _key(raw: bytes) -> bytes | None:
        """The bytes after `"gpu":` near the start (the writer puts it second): which
        templates to try. Only a hint: the whole line is matched against them."""
        i = raw.find(_GPU_KEY, 0, 64)
        if i < 0:
            return None
        i += len(_GPU_KEY)
        return raw[i : raw.find(b",", i, i + 8)]

    def row(self, raw: bytes) -> GpuRow | None:
        """The checked row of a line that matches a template; None: read it in full."""
        i = raw.find(_GPU_KEY, 0, 64)  # _key, inline: this runs once per line
        if i < 0:
            return None
        i += len(_GPU_KEY)
        key = raw[i : raw.find(b",", i, i + 8)]
        for tpl in self._by_gpu.get(key, ()):
            row = tpl.row(raw)
            if row is not None:
                self.hits += 1
                self._misses[key] = 0
                return row
        return None

    def learn(self, raw: bytes, d: dict[str, Any], row: GpuRow) -> None:
        """Keep the line that the full reader just checked (`d` parsed, `row` its result)
        as a template, unless templates of its GPU keep missing (then only now and then:
        a recording whose lines never repeat pays for few templates)."""
        key = self._key(raw)
        if key is None or len(raw) > MAX_TEMPLATE_BYTES:
            return
        missed = self._misses.get(key, 0) + 1
        self._misses[key] = missed
        if missed & (missed - 1):  # learn at the 1st, 2nd, 4th, 8th... miss in a row
            return
        kept = self._by_gpu.setdefault(key, [])
        tpl = make_template(raw, d, row, kept[0] if kept else None)
        if tpl is not None:
            kept.insert(0, tpl)
            del kept[TEMPLATES_PER_GPU:]


def make_template(
    raw: bytes, d: dict[str, Any], row: GpuRow, prev: Template | None = None
) -> Template | None:
    """The template of a checked GPU line, or None when it cannot safely be one.

    Its slots are `t` and the readings that changed since `prev` (the GPU's last template)
    or were slots there: a reading that stays put (a power limit, a clock, a process's GPU
    memory) is compared as bytes, which costs nothing, instead of parsed, which costs a
    float() and a range check on every line. The first template of a GPU has `t` alone."""
    procs = schema.bounded_list(d, "procs", "", schema.MAX_PROCS_PER_GPU)
    if len(row.procs) != len(procs):
        return None  # a pid listed twice: which entry won is the full reader's business
    numbers = [m.span(1) for m in _TOKEN.finditer(raw) if m.group(1) is not None]
    paths = _paths(raw, d, numbers)
    if paths is None:
        return None
    texts = {path: raw[start:end] for (start, end), path in zip(numbers, paths, strict=True)}
    vary = {("t",)}
    if prev is not None:
        vary |= prev.slotted | {p for p, text in texts.items() if prev.texts.get(p) != text}
    parts: list[bytes] = []
    slots: list[tuple] = []
    slotted = set()
    pos = 0
    for (start, end), path in zip(numbers, paths, strict=True):
        slot = _slot(path, d, procs, row) if path in vary else None
        if slot is None:
            continue
        parts += [re.escape(raw[pos:start]), _SLOT]
        slots.append(slot)
        slotted.add(path)
        pos = end
    if ("t",) not in slotted:
        return None
    parts.append(re.escape(raw[pos:]))
    return Template(re.compile(b"".join(parts), re.DOTALL), row, slots, texts, frozenset(slotted))


def _slot(path: tuple[Any, ...], d: dict[str, Any], procs: list[Any], row: GpuRow) -> tuple | None:
    """The slot of the number at `path` with its range, or None to keep it literal."""
    if path == ("t",):
        return ("t", 0.0, schema.T_MAX)
    if len(path) == 1 and path[0] in _GPU_SLOTS:
        attr, lo, hi = _GPU_SLOTS[path[0]]
        if getattr(row.gpu, attr) is None or attr in row.gpu.na:
            return None
        return ("gpu", attr, lo, hi)
    if len(path) == 3 and path[0] == "procs" and path[2] in _PROC_SLOTS:
        pid = procs[path[1]].get("pid")
        p = row.procs.get(pid) if type(pid) is int else None
        attr, lo, hi = _PROC_SLOTS[path[2]]
        if p is None or getattr(p, attr) is None:
            return None
        return ("proc", pid, attr, lo, hi)
    return None


def _paths(raw: bytes, d: Any, numbers: list[tuple[int, int]]) -> list[tuple] | None:
    """Where in the parsed line each number token lies (keys and list indices), found by
    parsing the line with each number replaced by a marked string: duplicate keys and
    look-alike text cannot mislead it. None when a number is not found exactly once."""
    probe: list[bytes] = []
    pos = 0
    for k, (start, end) in enumerate(numbers):
        probe += [raw[pos:start], f'"{_SENTINEL}{k}"'.encode()]
        pos = end
    probe.append(raw[pos:])
    try:
        p = parse_line(b"".join(probe), "")
    except Exception:  # noqa: BLE001 - no template, the line was read all the same
        return None
    found: dict[int, tuple] = {}
    if not _walk(p, d, (), found) or len(found) != len(numbers):
        return None
    return [found[k] for k in range(len(numbers))]


def _walk(p: Any, d: Any, path: tuple, found: dict[int, tuple]) -> bool:
    """Fill `found` (number -> path) from the probe `p` beside the parsed line `d`; False
    when they differ in shape or a marker is not where a number is."""
    if isinstance(p, str) and p.startswith(_SENTINEL):
        k = int(p[1:]) if p[1:].isdigit() else -1
        if k < 0 or k in found or not schema.is_number(d):
            return False
        found[k] = path
        return True
    if isinstance(p, dict):
        if not isinstance(d, dict) or p.keys() != d.keys():
            return False
        return all(_walk(v, d[k], (*path, k), found) for k, v in p.items())
    if isinstance(p, list):
        if not isinstance(d, list) or len(p) != len(d):
            return False
        return all(
            _walk(v, x, (*path, i), found) for i, (v, x) in enumerate(zip(p, d, strict=True))
        )
    return True
