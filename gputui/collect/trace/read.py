"""Reading a recording from disk: untrusted input, streamed, bounded, linear.

`read_trace(path)` is the one reader of recordings (replay, `check --replay`, `snapshot
--replay`, bundles, tests). The bounds and the per-field rule (structural damage is an
error, an out-of-range reading is N/A) are in trace_schema. This module adds what concerns
the file as a whole:

The file itself is read by gputui.collect.trace.lines:

- **Special files are refused before any read can block.** The file is opened with
  O_NONBLOCK and checked with fstat on the open descriptor (no race between a stat and the
  open): a FIFO, /dev/zero, another character or block device, a socket or a directory is
  an error, never a read.
- **Streaming and linear.** Lines are read one at a time with a length limit
  (MAX_LINE_BYTES), so a huge line is refused after that many bytes; gzip is recognised by
  its magic bytes and decompressed as it is read, counting every byte (MAX_TOTAL_BYTES).
  Grouping lines into samples costs O(1) per line.
- **Samples** (gputui.collect.trace.grouping, shared with the window of `snapshot`).
  Consecutive lines with times within SAME_SAMPLE_S of the sample's first line
  and distinct GPU indices form one sample; a repeated GPU index or a larger gap starts the
  next. Samples must be in time order: a sample whose time is not after the previous one is
  an error naming the line (a backwards clock could make a hang look over, or invent one).
- **Repairs, all documented and all safe:** an exact duplicate of a line of the current or
  the previous sample (same `t` and `gpu`, same bytes) is dropped, so a file with every line
  twice replays as the original (a *different* line for the same `t` and `gpu` is an error);
  a typed record identical to one of the last _RECENT_RECORDS is dropped; a UTF-8 byte order
  mark at the start and CR line ends are ignored; a recording cut short (a gzip stream
  without its end, or a last line with no newline that does not parse, as after a kill)
  keeps its complete lines.
- **Typed records** (lines with a `"type"` key) are checked against their type's shape
  (gputui.collect.trace.record_schema); one that does not fit is skipped, counted in `skipped`,
  and the first SKIP_NOTES are named in `skip_notes` (`FILE:LINE: rendezvous record skipped
  (jobs: a number, expected a list)`), which the commands print as one line each. `meta`
  may only come before the first sample, and its `host` becomes every snapshot's
  `hostname`; every other record is attached unchanged to `Snapshot.records` of the first
  sample whose `t` is >= the record's `t` (the last sample when none is).

Every failure is one GputuiError line: `FILE:LINE: what` (or `FILE: what` for the file as a
whole); the commands print it and exit 2.
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

from gputui.collect.model import ProcessInfo, Snapshot
from gputui.collect.procs.jobs import group_jobs
from gputui.collect.trace import gpu_line, record_schema, schema
from gputui.collect.trace.grouping import OPENED, REPEAT, Grouping
from gputui.collect.trace.lines import iter_lines, parse_line, shown
from gputui.collect.trace.schema import printable
from gputui.collect.trace.template import LineTemplates
from gputui.errors import GputuiError
from gputui.redact.recorded import recorded_record

# How many recent typed records are remembered to drop exact duplicates.
_RECENT_RECORDS = 64
# How many skipped records are named, each with its line and reason; the rest are counted.
SKIP_NOTES = 3


class _Sample:
    """The lines of the sample being read: one per GPU, in file order."""

    def __init__(self, row: gpu_line.GpuRow, line: int) -> None:
        self.t0 = row.t
        self.line = line
        self.rows: dict[int, gpu_line.GpuRow] = {row.gpu.index: row}


class TraceReader:
    """Folds validated lines into snapshots. One file, one reader, one pass."""

    def __init__(self, path: str | Path, *, templates: bool | LineTemplates = True) -> None:
        self.path = path
        # GPU lines that repeat a checked line but for its readings are read from its
        # template (gputui.collect.trace.template); False reads every line in full. Readers
        # of parts of one file may share their templates (gputui.collect.trace.window).
        if isinstance(templates, LineTemplates):
            self.templates: LineTemplates | None = templates
        else:
            self.templates = LineTemplates() if templates else None
        self.snaps: list[Snapshot] = []
        self.cur: _Sample | None = None
        self.host: str | None = None
        self.saw_meta = False
        self.grouping = Grouping(shown(path))  # which sample each GPU line belongs to
        self._close = self.close_sample  # bound once: handed to Grouping.place every line
        self.recent_records: deque[bytes] = deque(maxlen=_RECENT_RECORDS)
        self.pending: list[tuple[float, dict[str, Any]]] = []  # records after the last sample
        self.n_records = 0
        self.dropped = 0  # exact duplicates
        self.skipped = 0  # typed records of the wrong shape (gputui.collect.trace.record_schema)
        self.skip_notes: list[str] = []  # where the first SKIP_NOTES of them were, and why
        self._jobs_of: tuple[tuple[Any, ...], tuple[Any, ...]] = ((None,), ())
        # The last sample's row sources (templates) and where its processes were in its
        # rows: a sample of rows from the same templates is built from them (_build).
        self._shape: tuple[tuple[Any, ...], list[tuple[int, int]]] = ((), [])

    # ------------------------------------------------------------ reading

    def read(self, stop: threading.Event | None = None) -> list[Snapshot]:
        """Every sample (`self.snaps` grows as they are read: a replay may start on them);
        `stop` set ends the reading early, with what was read."""
        lines = iter_lines(self.path)
        # feed(), unrolled: this loop runs once per line (200,000 in a day-long recording)
        row_of = self.templates.row if self.templates is not None else None
        gpu_line = self._gpu_line
        try:
            for data, ended, n in lines:
                row = row_of(data) if row_of is not None else None
                if row is not None:
                    gpu_line(row, data, n)
                elif not self._full(data, ended, n):
                    break  # a last line cut short by a kill: keep the samples before it
                if stop is not None and n % 1024 == 0 and stop.is_set():
                    break
        finally:
            lines.close()
        return self.finish()

    def feed(self, data: bytes, ended: bool, n: int) -> bool:
        """Line `n`, not blank; False when it is a last line cut short (the end)."""
        row = self.templates.row(data) if self.templates is not None else None
        if row is not None:
            self._gpu_line(row, data, n)
            return True
        return self._full(data, ended, n)

    def _full(self, data: bytes, ended: bool, n: int) -> bool:
        """A line no template reads, read in full; False when it is a last line cut short."""
        where = self.grouping.where(n)
        try:
            d = parse_line(data, where)
        except GputuiError:
            if not ended:  # only the last line can lack its newline
                return False
            raise
        self.line(d, data, where, n)
        return True

    def finish(self) -> list[Snapshot]:
        """The samples read, the last one completed (GputuiError when there are none)."""
        self.close_sample()
        if not self.snaps:
            raise GputuiError(f"{shown(self.path)}: no samples in file")
        if self.pending:  # records after the last sample belong to it
            last = self.snaps[-1]
            self.snaps[-1] = replace(last, records=last.records + tuple(r for _, r in self.pending))
            self.pending = []
        return self.snaps

    def notes(self) -> list[str]:
        """What the reader skipped, for the user: the first few records by line, then the
        count of them all (empty when nothing was skipped)."""
        out = list(self.skip_notes)
        if self.skipped > len(out):
            out.append(
                f"{shown(self.path)}: {self.skipped} record(s) of the wrong shape skipped in all"
            )
        return out

    def line(self, d: Any, raw: bytes, where: str, n: int) -> None:
        if not isinstance(d, dict):
            raise GputuiError(f"{where}: expected a JSON object per line")
        if "type" in d:
            self._record(d, raw, where, n)
            return
        t = schema.sample_time(d.get("t"), where)
        gpu = schema.gpu_index(d.get("gpu"), where)
        if self.grouping.repeat(t, gpu, raw, n):
            self.dropped += 1
            return
        row = gpu_line.gpu_row(d, t, gpu, where)
        if self.templates is not None:
            self.templates.learn(raw, d, row)
        self._gpu_line(row, raw, n)

    def _gpu_line(self, row: gpu_line.GpuRow, raw: bytes, n: int) -> None:
        """A checked GPU line into its sample, or the next one (gputui.collect.trace.grouping);
        an exact repeat is dropped (see the module docstring)."""
        got = self.grouping.place(row.t, row.gpu.index, raw, n, self._close)
        if got == REPEAT:
            self.dropped += 1
        elif got == OPENED:
            self.cur = _Sample(row, n)
        else:  # JOINED: the open sample's first line set self.cur
            assert self.cur is not None
            self.cur.rows[row.gpu.index] = row

    def _record(self, d: dict[str, Any], raw: bytes, where: str, n: int) -> None:
        kind, t = record_schema.record(d, where)
        digest = hashlib.blake2b(raw, digest_size=16).digest()
        if digest in self.recent_records:
            self.dropped += 1
            return
        self.recent_records.append(digest)
        if kind == "meta" and (self.snaps or self.cur is not None or self.saw_meta):
            raise GputuiError(f"{where}: a 'meta' record may only come first")
        why = record_schema.problem(kind, d)
        if why is not None:
            self.skipped += 1
            if len(self.skip_notes) < SKIP_NOTES:
                self.skip_notes.append(f"{where}: {kind} record skipped ({printable(why)})")
            return
        if b"\\ud" in raw or b"\\uD" in raw:  # a \uD800-style escape: maybe a lone surrogate
            d = schema.without_surrogates(d)
        if kind == "meta":
            self.host = record_schema.meta(d, where).host
            self.saw_meta = True
            return
        if kind == "nogpu":
            self._bare(d, t, where, n)
            return
        self.n_records += 1
        if self.n_records > schema.MAX_RECORDS:
            raise GputuiError(f"{where}: more than {schema.MAX_RECORDS} typed records")
        d = recorded_record(d)  # a record is anyone's text: its secrets go as it is read
        if self.snaps and t <= self.snaps[-1].t:
            # A record that lags the samples (a stack dump written after it finished): the
            # first sample at or after its time, found by bisection (times are increasing).
            i = bisect.bisect_left(self.snaps, t, key=lambda s: s.t)
            s = self.snaps[i]
            self.snaps[i] = replace(s, records=s.records + (d,))
        else:
            self.pending.append((t, d))

    def _bare(self, d: dict[str, Any], t: float, where: str, n: int) -> None:
        """A `nogpu` record: a sample of a machine without GPUs (its shape checked), with the
        host processes it showed and why there were no GPUs."""
        self.close_sample()
        self.grouping.bare(t, n)
        procs = tuple(replace(gpu_line.process(e, 0, where), gpus=()) for e in d.get("procs") or ())
        error = d.get("error")
        self._append(
            Snapshot(
                t=t,
                processes=procs,
                source="replay",
                gpu_error=printable(error) if isinstance(error, str) else None,
                hostname=self.host,
            )
        )

    def close_sample(self) -> None:
        """Make the open sample a snapshot (a part of a file read by window ends here)."""
        cur = self.cur
        if cur is None:
            return
        self.cur = None
        self._append(self._build(cur))

    def _append(self, snap: Snapshot) -> None:
        """A sample made, with the records read before it that belong to it."""
        take = [r for t, r in self.pending if t <= snap.t]
        if take:
            self.pending = [(t, r) for t, r in self.pending if t > snap.t]
            snap = replace(snap, records=tuple(take))
        self.snaps.append(snap)

    def _build(self, cur: _Sample) -> Snapshot:
        rows = [cur.rows[i] for i in sorted(cur.rows)]
        shape = tuple([r.source for r in rows])
        if shape == self._shape[0]:
            # Every row read from the templates the last sample's rows were read from: the
            # same processes on the same GPUs, in the same order, with the same jobs; only
            # their readings differ, and those are in the rows.
            processes = tuple([rows[k].procs[pid] for k, pid in self._shape[1]])
        else:
            processes, order = self._processes(rows, cur.line)
            # every row from a template, and an order to reuse
            self._shape = (shape, order) if order is not None and None not in shape else ((), [])
            # The jobs depend on who the processes are, not on their readings: the same
            # processes as the last sample's have its jobs (group_jobs is most of a sample).
            who = tuple(
                (p.pid, p.gpus, p.rank, p.ppid, p.parent_cmd, bool(p.cmdline), p.env_error)
                for p in processes
            )
            if who != self._jobs_of[0]:
                self._jobs_of = (who, group_jobs(processes))
        return Snapshot(
            t=cur.t0,
            gpus=tuple([r.gpu for r in rows]),
            processes=processes,
            jobs=self._jobs_of[1],
            source="replay",
            phase=next(iter(cur.rows.values())).phase,  # the sample's first line
            hostname=self.host,
        )

    def _processes(
        self, rows: list[gpu_line.GpuRow], line: int
    ) -> tuple[tuple[ProcessInfo, ...], list[tuple[int, int]] | None]:
        """The sample's processes in order (by GPUs, then pid), and where each is in the
        rows as (row, pid); None when one was built here (merged from several GPUs, or
        listed only in `pids`): then the next sample cannot be built from the rows alone."""
        procs: dict[int, ProcessInfo] = {}
        at: dict[int, int] | None = {}
        for k, row in enumerate(rows):
            gi = row.gpu.index
            listed = row.procs
            bare = [p for p in row.gpu.pids if p not in listed]
            if bare:
                at = None
            for pid in [*listed, *bare]:
                p = listed.get(pid) or ProcessInfo(
                    pid=pid, gpus=(gi,), gpu_mem_mb=row.mem.get(pid), live=False
                )
                if pid in procs:  # one process on several GPUs
                    p = _merge_gpus(procs[pid], p)
                    at = None
                elif len(procs) >= schema.MAX_PROCS_PER_SAMPLE:
                    raise GputuiError(
                        f"{self.grouping.where(line)}: more than "
                        f"{schema.MAX_PROCS_PER_SAMPLE} processes in one sample"
                    )
                elif at is not None:
                    at[pid] = k
                procs[pid] = p
        processes = tuple(sorted(procs.values(), key=lambda p: (p.gpus, p.pid)))
        return processes, None if at is None else [(at[p.pid], p.pid) for p in processes]


def _merge_gpus(a: ProcessInfo, b: ProcessInfo) -> ProcessInfo:
    if a.gpu_mem_mb is None and b.gpu_mem_mb is None:
        mem = None
    else:
        mem = (a.gpu_mem_mb or 0.0) + (b.gpu_mem_mb or 0.0)
    return replace(a, gpus=tuple(sorted(set(a.gpus) | set(b.gpus))), gpu_mem_mb=mem)


def read_trace(path: str | Path) -> list[Snapshot]:
    """Every sample of a recording, oldest first. Raises GputuiError (one line) on a bad file.
    A history file of readings alone (plain GPU lines, nvidia-smi's CSV) is read into
    columns first (gputui.collect.trace.fast): the same Snapshots, a fraction of the time."""
    from gputui.collect.trace.fast import read_columns

    cols = read_columns(path)
    if cols is not None:
        from gputui.collect.trace.columns import ColumnSnaps

        return list(ColumnSnaps(cols))
    return TraceReader(path).read()
