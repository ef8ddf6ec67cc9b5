"""One moment of a recording, without parsing all of it: `snapshot --replay FILE [--at S]`.

Why: a day of 1 Hz samples on 8 GPUs is 200,000 GPU lines; `snapshot` parsed and judged
every one of them to show one (13.3 s on a 2-core box, issue 34). What the moment needs is
the sample itself and the history its verdict depends on, which is bounded:

- an index pass reads the file once (the bounded stream of gputui.collect.trace.read:
  special files, gzip, sizes, line and blank-line counts) and groups its lines into samples
  by the time and GPU at the start of each line (`{"t":...,"gpu":N,` as the recorder writes
  them; any other line is parsed to find them), by the full reader's own rules and words
  (gputui.collect.trace.grouping: time order, duplicate lines, bounds), without parsing
  the rest of any GPU line;
- typed records (few) are all read and checked (gputui.collect.trace.record_schema);
- only the samples of the window are parsed and validated in full (its parts share their
  templates, gputui.collect.trace.template): from `before_s` seconds
  before the moment (the detector's longest memory: a hang is called after 60 s, departed
  ranks are remembered that long, wait shares span 30 s), moved further back to the last
  sample where `calm(snapshot)` holds (no GPU spinning: no spin run is in progress), so a
  hang that began hours earlier keeps its start;
- the records before the window are handed to its first sample (GPU health accumulates, the
  latest rendezvous record stands), those after the moment are not its history and are
  left out (after the last sample of the file, they belong to it, as the full reader has
  it).

The verdict of the window's last sample is then the one the whole replay gives there
(tests/test_trace_window.py compares them). A damaged GPU line outside the window is not
looked at: `check --replay` reads every line.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputui.collect.model import Snapshot
from gputui.collect.trace import schema
from gputui.collect.trace.columns import Columns, ColumnSnaps, SnapsView
from gputui.collect.trace.grouping import OPENED, REPEAT, Grouping
from gputui.collect.trace.lines import iter_lines, parse_line, shown
from gputui.errors import GputuiError

if TYPE_CHECKING:  # the full reader is imported when a file is not held as columns
    from gputui.collect.trace.read import TraceReader
    from gputui.collect.trace.template import LineTemplates

_PREFIX = re.compile(rb'\{"t":(-?[0-9][0-9.eE+-]{0,30}),"gpu":([0-9]{1,3})[,}]')
_RECORD = b'{"type":'
_META = b'{"type":"meta"'
_NOGPU = b'"nogpu"'  # in a record line (few): maybe a `nogpu` record, read whole to know
CHUNK = 64  # samples parsed at a time when the window is moved back to a calm sample


_Line = tuple[bytes, bool, int]  # (bytes, ended by a newline, line number): iter_lines


@dataclass
class _IndexedSample:
    t: float
    lines: list[_Line] = field(default_factory=list)


@dataclass
class Moment:
    """The window's snapshots, oldest first; the moment is the last one."""

    snaps: Sequence[Snapshot]  # a list, or a view of columns (gputui.collect.trace.columns)
    first_t: float  # the file's first sample time (what --at counts from)
    samples: int  # samples in the whole file
    notes: list[str]  # records skipped (gputui.collect.trace.read.TraceReader.notes)


class _Index:
    """Samples and records of a file, from one pass that parses no GPU line it can avoid;
    the lines are grouped by the full reader's rules (gputui.collect.trace.grouping)."""

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.samples: list[_IndexedSample] = []
        self.records: list[_Line] = []
        self.grouping = Grouping(shown(path))
        self.bare = False  # a `nogpu` record: samples of a machine without GPUs

    def read(self) -> None:
        lines = iter_lines(self.path)
        try:
            for data, ended, n in lines:
                got = self._where_in_time(data, ended, n)
                if got is None:
                    if not ended and not data.startswith(_RECORD):
                        break  # a last line cut short: its sample is not kept
                    if data.startswith(_META) and self.samples:
                        raise GputuiError(
                            f"{self.grouping.where(n)}: a 'meta' record may only come first"
                        )
                    self.records.append((data, ended, n))
                    self.bare = self.bare or _NOGPU in data
                    continue
                t, gpu = got
                placed = self.grouping.place(t, gpu, data, n, close=_nothing)
                if placed == REPEAT:
                    continue  # the same line again, as the full reader drops it
                if placed == OPENED:
                    self.samples.append(_IndexedSample(t))
                self.samples[-1].lines.append((data, ended, n))
        finally:
            lines.close()
        if not self.samples and not self.bare:
            raise GputuiError(f"{shown(self.path)}: no samples in file")

    def _where_in_time(self, data: bytes, ended: bool, n: int) -> tuple[float, int] | None:
        """(t, gpu) of a GPU line, None for a record (or a cut last line): from the prefix
        the recorder writes, else by parsing the line."""
        if data.startswith(_RECORD):
            return None
        m = _PREFIX.match(data) if ended else None  # a cut last line is parsed: is it whole?
        if m is not None:
            try:
                t = float(m.group(1))
            except ValueError:
                t = float("nan")
            if 0 <= t <= schema.T_MAX and int(m.group(2)) <= schema.MAX_GPU_INDEX:
                return t, int(m.group(2))
        where = self.grouping.where(n)
        try:
            d = parse_line(data, where)
        except GputuiError:
            if not ended:
                return None
            raise
        if not isinstance(d, dict):
            raise GputuiError(f"{where}: expected a JSON object per line")
        if "type" in d:
            return None
        return schema.sample_time(d.get("t"), where), schema.gpu_index(d.get("gpu"), where)


def _nothing() -> None:
    """The index keeps no sample to finish when the next one opens."""


def _parse(
    path: str | Path,
    samples: list[_IndexedSample],
    records: list[_Line],
    templates: LineTemplates,
) -> list[Snapshot]:
    """The samples, parsed and validated in full, with the file's `meta` record (the other
    records are attached by _attach). `templates` are shared by the window's parts: a
    template learned from any line of the file reads a later part's lines too."""
    from gputui.collect.trace.read import TraceReader

    reader = TraceReader(path, templates=templates)
    for data, ended, n in records:  # meta first: every sample gets the host
        if data.startswith(_META):
            reader.feed(data, ended, n)
            break
    for s in samples:
        for data, ended, n in s.lines:
            reader.feed(data, ended, n)
    reader.close_sample()
    if not reader.snaps:
        raise GputuiError(f"{shown(path)}: no readable sample at the moment asked for")
    return reader.snaps


def _safe_start(
    snaps: Sequence[Snapshot],
    upto: int,
    calm: Callable[[Snapshot], bool],
    calm_s: float,
    at_file_start: bool,
) -> int | None:
    """The latest index k <= upto where no spin can be in progress: its sample is calm and
    the last sample that was not is more than `calm_s` before it (what came before the list
    is known only at the start of the file)."""
    last_busy: float | None = float("-inf") if at_file_start else None
    best = None
    for n, s in enumerate(snaps[: upto + 1]):
        if not calm(s):
            last_busy = s.t
            continue
        if last_busy is None:  # anything before the list is before its first sample
            ok = s.t - snaps[0].t >= calm_s
        else:
            ok = s.t - last_busy > calm_s
        if ok:
            best = n
    return best


def read_moment(
    path: str | Path,
    at: float | None,
    before_s: float,
    calm: Callable[[Snapshot], bool],
    calm_s: float = 2.0,
) -> Moment:
    """The window of history of the sample `at` seconds into the file (the last sample when
    None, or when the file is shorter). `calm_s`: how long every sample must be calm before
    a window may start there (longer than the detector bridges a dip in a spin).
    GputuiError (one line) on a damaged file."""
    from gputui.collect.trace.fast import read_columns

    cols = read_columns(path)
    if cols is not None:  # readings alone, held as columns: only the window is built
        return _column_moment(cols, at, before_s, calm, calm_s)
    index = _Index(path)
    index.read()
    if index.bare:  # samples of a machine without GPUs (a bundle's, a few): read whole
        return _whole_moment(path, at)
    samples = index.samples
    t0 = samples[0].t
    i = len(samples) - 1
    if at is not None:
        i = bisect.bisect_left([s.t - t0 for s in samples], at)
        i = min(i, len(samples) - 1)
    end_t = samples[i].t
    j = bisect.bisect_left([s.t for s in samples], end_t - before_s)
    from gputui.collect.trace.template import LineTemplates

    templates = LineTemplates()
    snaps = _parse(path, samples[j : i + 1], index.records, templates)
    mark = 0  # where the window would start, in `snaps`
    while True:  # a spin in progress at the window's start: move back to where it began
        k = _safe_start(snaps, mark, calm, calm_s, at_file_start=j == 0)
        if k is None and j == 0:
            k = 0  # spinning since the file began: the window is the whole start
        if k is not None:
            snaps = snaps[k:]
            break
        lo = max(0, j - CHUNK)
        more = _parse(path, samples[lo:j], index.records, templates)
        snaps, mark, j = more + snaps, len(more), lo
    records = _records(path, index.records)
    last_of_file = i == len(samples) - 1
    return Moment(
        snaps=_attach(snaps, records, last_of_file),
        first_t=t0,
        samples=len(samples),
        notes=records[1].notes(),
    )


def _whole_moment(path: str | Path, at: float | None) -> Moment:
    """The moment of a file read by the full reader: one that holds samples of a machine
    without GPUs (`nogpu` records), which the index pass does not place. Read whole, its
    history is the whole file up to the moment: the verdict is the full replay's."""
    from gputui.collect.trace.read import TraceReader

    reader = TraceReader(path)
    snaps = reader.read()
    t0 = snaps[0].t
    i = len(snaps) - 1
    if at is not None:
        i = min(bisect.bisect_left([s.t - t0 for s in snaps], at), i)
    return Moment(snaps=snaps[: i + 1], first_t=t0, samples=len(snaps), notes=reader.notes())


def _records(
    path: str | Path, lines: list[_Line]
) -> tuple[list[tuple[float, dict[str, Any]]], TraceReader]:
    """Every typed record of the file, checked as the full reader checks them."""
    from gputui.collect.trace.read import TraceReader

    reader = TraceReader(path)
    for data, ended, n in lines:
        if not reader.feed(data, ended, n):
            break
    return sorted(reader.pending, key=lambda p: p[0]), reader


def _attach(
    snaps: list[Snapshot],
    records: tuple[list[tuple[float, dict[str, Any]]], TraceReader],
    last_of_file: bool,
) -> list[Snapshot]:
    """Each record on the first window sample at or after its time; those before the window
    on its first sample, those after the moment only when it is the file's last sample."""
    times = [s.t for s in snaps]
    by: dict[int, list[dict[str, Any]]] = {}
    for t, rec in records[0]:
        k = bisect.bisect_left(times, t)
        if k == len(snaps):
            if not last_of_file:
                continue  # the moment's future
            k = len(snaps) - 1
        by.setdefault(k, []).append(rec)
    return [replace(s, records=tuple(by[k])) if k in by else s for k, s in enumerate(snaps)]


def _column_moment(
    cols: Columns,
    at: float | None,
    before_s: float,
    calm: Callable[[Snapshot], bool],
    calm_s: float,
) -> Moment:
    """read_moment's window of a file held as columns (gputui.collect.trace.columns): the
    same rule, in sample numbers; its samples are built as they are looked at (a chunk at
    a time while the start is sought) and the window is a view, not a list. No record to
    attach."""
    all_snaps = ColumnSnaps(cols)
    times = all_snaps.times
    i = len(times) - 1
    if at is not None:
        i = min(_first_at(times, at), i)
    j = bisect.bisect_left(times, times[i] - before_s)
    mark = 0
    while True:  # a spin in progress at the window's start: move back to where it began
        k = _safe_start(SnapsView(all_snaps, j, i + 1), mark, calm, calm_s, j == 0)
        if k is None and j == 0:
            k = 0
        if k is not None:
            break
        lo = max(0, j - CHUNK)
        mark, j = j - lo, lo
    return Moment(
        snaps=SnapsView(all_snaps, j + k, i + 1),
        first_t=times[0],
        samples=len(times),
        notes=[],
    )


def _first_at(times: Any, at: float) -> int:
    """The first sample `at` seconds or more into the file, as read_moment counts (its
    offsets are differences of times, compared as such)."""
    t0 = times[0]
    return bisect.bisect_left([t - t0 for t in times], at)
