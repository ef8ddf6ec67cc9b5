"""The fast reading of a recording of plain GPU lines: into columns, or not at all.

A *plain* recording is one whose every line is a GPU line of readings (the calibration
format's floor: `{"t": ..., "gpu": 0, "util": ..., "mem_util": ..., "power_w": ...,
"pids": [...], ...}`) without processes (`procs`, `proc_mem`) or typed records: what another
tool, a cron job or the calibration recorder writes. `read_plain(path)` reads it into
gputui.collect.trace.columns.Columns, checking each field by the full reader's rules
(gputui.collect.trace.schema) a column at a time (a type set, a min and a max over a block
of lines, in C) instead of a line at a time.

It gives up (returns None) on anything a clean file does not hold: a typed record, a
process list, a line that is not one JSON object, a value the full reader would turn into
N/A or refuse, a repeated or out-of-order sample, a cut last line, a line nested deeper
than the bound, a bound of the file hit... The caller then reads the file with the full
reader (gputui.collect.trace.read), which has the words for each of those, so a damaged
file gets exactly the error it always got, and this path never has to be as careful as the
full reader about what to say: only about what it accepts.
"""

from __future__ import annotations

import json
import math
import zlib
from array import array
from collections.abc import Iterator, Sequence
from itertools import compress, repeat
from operator import add, sub
from pathlib import Path
from typing import IO, Any

from gputui.collect.trace import schema
from gputui.collect.trace.columns import FLOAT_ATTRS, INT_ATTRS, Columns
from gputui.collect.trace.grouping import SAME_SAMPLE_S
from gputui.collect.trace.lines import _BOM, _Lines, open_untrusted
from gputui.errors import GputuiError

BLOCK_BYTES = 1 << 20
"""Bytes read at a time: the lines are split from blocks, not read one by one (a generator
step per line cost 0.45 s of 200,000 lines)."""

BLOCK = 8192
"""Lines checked at a time: large enough that a column's checks run in C, small enough
that the block's parsed lines (about 1 KiB each) stay a few MiB."""

# The file keys read, in order: readings (key, attr, lo, hi, integral), then the rest.
_READINGS = schema.GPU_READINGS
_KEYS = schema.PLAIN_KEYS
_NONE = type(None)
_NANS = array("d", [math.nan])
_NUMBER_TYPES = {int, float, _NONE}


_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # what json.loads runs
try:  # the `history` extra: msgspec parses and checks in C, imported only on this path
    from gputui.collect.trace import plain_typed as _TYPED_MODULE

    _TYPED: Any = _TYPED_MODULE.columns
except ImportError:  # pragma: no cover - the standard library's scanner reads the same
    _TYPED = None


class _NotPlain(Exception):
    """The file is not a clean plain recording: the full reader reads it."""


def read_plain(path: str | Path) -> Columns | None:
    """The file's samples as columns, or None when it is not a clean plain recording.
    GputuiError only for what the full reader would refuse before its first line (no
    such file, a FIFO, not gzip): the file itself."""
    reader = _PlainReader()
    raw = open_untrusted(path)
    try:
        f = _Lines(path, raw)  # gzip recognised, a .gz name that is not gzip refused
    except BaseException:
        raw.close()
        raise
    try:
        reader.read(_blocks(f.f))
    except (_NotPlain, GputuiError, EOFError, OSError, zlib.error):
        return None  # the full reader says what, and where
    except (ValueError, RecursionError, OverflowError, MemoryError, TypeError):
        return None
    finally:
        f.close()
    if len(reader.cols) == 0:
        return None
    reader.cols.procs_listed = reader.pids_seen
    return reader.cols


def _blocks(f: IO[bytes] | Any) -> Iterator[list[bytes]]:
    """The lines of the stream, a block at a time, within the full reader's bounds
    (gputui.collect.trace.lines: bytes, lines, line length); a blank line, a byte order
    mark or a last line without its newline is not clean (the full reader's to read)."""
    total = lines = 0
    tail = b""
    max_total, max_lines, max_line = schema.MAX_TOTAL_BYTES, schema.MAX_LINES, schema.MAX_LINE_BYTES
    while True:
        block = f.read(BLOCK_BYTES)
        if not block:
            if tail:
                raise _NotPlain  # a last line without its newline
            return
        total += len(block)
        if total > max_total or (total == len(block) and block.startswith(_BOM)):
            raise _NotPlain
        parts = (tail + block).split(b"\n")
        tail = parts.pop()
        if len(tail) > max_line:
            raise _NotPlain
        lines += len(parts)
        if lines > max_lines or b"" in parts or (parts and max(map(len, parts)) > max_line):
            raise _NotPlain
        yield parts


class _PlainReader:
    def __init__(self) -> None:
        self.cols = Columns()
        self.rows: list[tuple[Any, ...]] = []
        self.n_lines = 0
        self.pids_seen = False  # a line with `pids` (even empty): processes are listed
        # Checked values, each equal one shared: strings keyed by themselves, pid lists by
        # their tuple (a tuple never equals a string: one dict holds both)
        self.strings: dict[Any, Any] = {}
        # the open sample: its time, GPUs, how many pids it lists
        self.t0 = -1.0
        self.gpus: set[int] = set()
        self.listed = 0
        self.recent: set[tuple[float, int]] = set()  # (t, gpu) of the open sample's lines
        self.older: set[tuple[float, int]] = set()  # ...and of the sample before it

    def read(self, blocks: Iterator[list[bytes]]) -> None:
        if _TYPED is not None:
            self._read_typed(blocks, _TYPED)
            return
        # json.loads without its Python layers (decode, raw_decode, the whitespace match):
        # the C scanner they call, on a line that starts with `{`; a line with anything
        # after its object (even spaces) is not clean. 0.6 s of 200,000 lines.
        scan, keys, depth = _SCAN, _KEYS, schema.MAX_DEPTH
        rows = self.rows
        for block in blocks:
            for data in block:
                if data[:1] != b"{" or data.count(b"[") + data.count(b"{") > depth:
                    raise _NotPlain  # padding, CR line ends, nesting deeper than the bound
                text = data.decode("utf-8")
                try:
                    d, end = scan(text, 0)
                except StopIteration:
                    raise _NotPlain from None
                if end != len(text) or "type" in d or "procs" in d or "proc_mem" in d:
                    raise _NotPlain
                rows.append(tuple(map(d.get, keys)))
            if len(rows) >= BLOCK:
                self._flush()
        self._flush()

    def _read_typed(self, blocks: Iterator[list[bytes]], columns: Any) -> None:
        """read(), parsed and checked by msgspec (the `history` extra; plain_typed says
        what it reads differently from json: only lines that are not clean). The byte
        checks run a block at a time in C (`map` over the block's lines): every line an
        object, no line nested deeper than the bound (the largest counts of `[` and `{`
        of the block's lines bound every line's; one line at a time past that bound)."""
        depth = schema.MAX_DEPTH
        for block in blocks:
            if not block:
                continue
            if not all(map(bytes.startswith, block, repeat(b"{"))):
                raise _NotPlain  # padding, CR line ends, not an object
            most = max(map(bytes.count, block, repeat(b"[")))
            if most + max(map(bytes.count, block, repeat(b"{"))) > depth:
                for data in block:
                    if data.count(b"[") + data.count(b"{") > depth:
                        raise _NotPlain
            self._flush_columns(columns(block), checked=True)

    def _flush(self) -> None:
        rows = self.rows[:]
        self.rows.clear()  # the same list: read() holds it
        if rows:
            self._flush_columns(list(zip(*rows, strict=True)))

    def _flush_columns(self, cols: list[Any], checked: bool = False) -> None:
        """Check and keep a block of lines given as columns (one sequence per key of
        _KEYS, in order). `checked`: every value was checked as it was decoded
        (plain_typed), the pid lists are tuples; only their sharing is left."""
        ts, gpus = cols[0], cols[1]
        if not checked:
            _check_times(ts, gpus)
        c = self.cols
        for k, (_key, attr, lo, hi, integral) in enumerate(_READINGS, start=2):
            col = cols[k]
            has_none = None in col if checked else _check_numbers(col, lo, hi, integral)
            if attr in FLOAT_ATTRS:
                if has_none and col.count(None) == len(col):  # a reading the file lacks
                    c.floats[attr].extend(_NANS * len(col))
                else:
                    c.floats[attr].extend(
                        [math.nan if v is None else v for v in col] if has_none else col
                    )
            elif attr in INT_ATTRS:
                c.ints[attr].extend(col)
        base = len(c.t)
        n_readings = 2 + len(_READINGS)
        col = cols[n_readings]
        if not self.pids_seen and col.count(None) != len(col):
            self.pids_seen = True
        pids = self._shared_pids(col) if checked else [self._pids(v) for v in col]
        c.pids.extend(pids)
        for out, col in zip((c.names, c.uuids, c.phases), cols[n_readings + 1 :], strict=True):
            if col.count(None) == len(col):
                out.extend(col)  # no such field in the file: the usual case
            else:
                out.extend([self._text(v) for v in col])
        c.t.extend(ts)
        c.gpu.extend(gpus)
        self._group(ts, gpus, pids, base)

    def _group(self, ts: Sequence[float], gpus: Sequence[int], pids: list[Any], base: int) -> None:
        """Samples by the full reader's rule (gputui.collect.trace.grouping): the lines
        that continue the open sample one by one, the rest as runs of one time when they
        are (_runs), else one by one."""
        m, n, t0 = 0, len(ts), self.t0
        while m < n and t0 >= 0 and abs(ts[m] - t0) <= SAME_SAMPLE_S:
            m += 1  # within the open sample's time: its lines, or a repeat (refused)
        if m:
            self._lines(ts[:m], gpus[:m], pids[:m], base)
        if m < n and not self._runs(ts[m:], gpus[m:], pids[m:], base + m):
            self._lines(ts[m:], gpus[m:], pids[m:], base + m)

    def _runs(self, ts: Sequence[float], gpus: Sequence[int], pids: list[Any], base: int) -> bool:
        """_lines' samples, worked out in C, for the common case alone: every sample's
        lines share one time, each sample's time more than SAME_SAMPLE_S past the last,
        no GPU twice in a sample, every bound far off. Then each time is a new sample (the
        rule's answer), and no line can repeat one of this or the last sample's. False,
        nothing changed: not that case (_lines decides, refusals included)."""
        n = len(ts)
        if self.t0 >= 0 and not ts[0] - self.t0 > SAME_SAMPLE_S:
            return False
        step = list(map(sub, ts[1:], ts))
        if step and (min(step) < 0 or [x for x in step if 0 < x <= SAME_SAMPLE_S]):
            return False
        bounds = [0, *compress(range(1, n), step)]  # where the time moves: a new sample
        ends = [*bounds[1:], n]
        if len(self.cols.starts) + len(bounds) > schema.MAX_SAMPLES:
            return False
        if len(set(zip(ts, gpus, strict=True))) != n:
            return False  # a GPU twice at one time
        most = max(map(sub, ends, bounds))
        lens = list(map(len, pids))
        if most > schema.MAX_GPUS_PER_SAMPLE or most * max(lens) > schema.MAX_PROCS_PER_SAMPLE:
            return False
        self.cols.starts.extend(map(add, bounds, repeat(base)))
        last = bounds[-1]
        if len(bounds) < 2:
            before = self.recent  # the sample open before this block's first
        else:
            prev = bounds[-2]
            before = set(zip(ts[prev:last], gpus[prev:last], strict=True))
        self.t0, self.gpus, self.listed = ts[last], set(gpus[last:]), sum(lens[last:])
        self.recent, self.older = set(zip(ts[last:], gpus[last:], strict=True)), before
        return True

    def _lines(self, ts: Sequence[float], gpus: Sequence[int], pids: list[Any], base: int) -> None:
        """Samples by the full reader's rule, line by line, for clean files only: a line
        whose time and GPU repeat one of this or the last sample's, or a sample whose time
        does not advance, gives up (the full reader drops an exact repeat and refuses the
        rest, with its words)."""
        starts, t0, seen, listed = self.cols.starts, self.t0, self.gpus, self.listed
        recent, older = self.recent, self.older
        for k, (t, gpu) in enumerate(zip(ts, gpus, strict=True)):
            at = (t, gpu)
            if at in recent or at in older:
                raise _NotPlain
            if t0 < 0 or gpu in seen or abs(t - t0) > SAME_SAMPLE_S:
                if t0 >= 0 and t <= t0:
                    raise _NotPlain
                if len(starts) >= schema.MAX_SAMPLES:
                    raise _NotPlain
                starts.append(base + k)
                t0, seen, listed = t, {gpu}, 0
                older, recent = recent, set()
            else:
                if len(seen) >= schema.MAX_GPUS_PER_SAMPLE:
                    raise _NotPlain
                seen.add(gpu)
            recent.add(at)
            listed += len(pids[k])
            if listed > schema.MAX_PROCS_PER_SAMPLE:
                raise _NotPlain
        self.t0, self.gpus, self.listed = t0, seen, listed
        self.recent, self.older = recent, older

    def _shared_pids(self, col: list[tuple[int, ...] | None]) -> list[tuple[int, ...]]:
        """Checked pid tuples, each equal tuple shared (one object for a job's pids)."""
        if len(self.strings) >= 65536:
            self.strings.clear()
        if None in col:
            col = [() if v is None else v for v in col]
        return list(map(self.strings.setdefault, col, col))

    def _pids(self, v: Any) -> tuple[int, ...]:
        if v is None:
            return ()
        if type(v) is not list:
            raise _NotPlain
        key = tuple(v)
        got = self.strings.get(key)
        if got is None:
            if len(v) > schema.MAX_PROCS_PER_GPU or any(
                type(p) is not int or not 1 <= p <= schema.PID_MAX_LIMIT for p in v
            ):
                raise _NotPlain
            got = key
            self._keep(key, got)
        return got  # type: ignore[no-any-return]

    def _text(self, v: Any) -> str | None:
        if v is None:
            return None
        if type(v) is not str:
            raise _NotPlain
        got = self.strings.get(v)
        if got is None:
            if len(v) > schema.MAX_STR_CHARS:
                raise _NotPlain
            got = schema.printable(v)
            self._keep(v, got)
        return got  # type: ignore[no-any-return]

    def _keep(self, key: Any, value: Any) -> None:
        if len(self.strings) >= 65536:
            self.strings.clear()
        self.strings[key] = value


def _check_times(ts: Sequence[Any], gpus: Sequence[Any]) -> None:
    """Every time a number in range, every GPU index a whole number in range (in C: a set
    of types, a sum (NaN anywhere makes it NaN), a min and a max); else not clean."""
    if set(map(type, ts)) - {int, float} or set(map(type, gpus)) != {int}:
        raise _NotPlain
    total = sum(ts)
    if total != total or min(ts) < 0 or max(ts) > schema.T_MAX:
        raise _NotPlain
    if min(gpus) < 0 or max(gpus) > schema.MAX_GPU_INDEX:
        raise _NotPlain


def _check_numbers(col: tuple[Any, ...], lo: float, hi: float, integral: bool) -> bool:
    """Every value a reading the full reader keeps as it is (None, or a number in range;
    a whole number for `integral`): else not clean (N/A, or an error, is its to say).
    True when the column holds a None. In C: a set of types, a sum (NaN anywhere makes it
    NaN), a min and a max."""
    kinds = set(map(type, col))
    if not kinds <= _NUMBER_TYPES or (integral and float in kinds):
        raise _NotPlain
    has_none = _NONE in kinds
    vals = [v for v in col if v is not None] if has_none else col
    if vals:
        if float in kinds:
            total = sum(vals)
            if total != total:
                raise _NotPlain  # a NaN (an infinity fails the range below)
        if min(vals) < lo or max(vals) > hi:
            raise _NotPlain
    return has_none
