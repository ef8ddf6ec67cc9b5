"""A recording held as columns of readings, its Snapshots built only when asked for.

Why: a recording that gputui's writer did not make (the calibration format's minimal GPU
lines, a cron job's JSON lines, nvidia-smi's CSV) has no processes, command lines or typed
records, only readings. Reading it into a Snapshot of objects per sample cost 75 us a line
and 1.5 KiB a sample (issue 42: 36 s and 366 MB for 200,000 lines); held as columns (one
`array` of C doubles per reading, NaN for "not in the file") it costs 8 bytes a reading, and
a sample becomes a Snapshot only when a face asks for it (`ColumnSnaps[k]`): `check`
builds one at a time and drops it, `snapshot` builds only its window.

A Snapshot built here equals the one the full reader (gputui.collect.trace.read) gives for
the same lines: the GPUs in index order, each reading a float (pstate and events ints), the
processes NVML listed (`pids`) as recorded processes, merged across GPUs, sorted by (GPUs,
pid), and the jobs grouped from them (tests/test_trace_columns.py compares both readers on
every recording that fits and on generated files).

Only clean files are held this way: the readers that fill Columns
(gputui.collect.trace.plain_lines, gputui.collect.trace.smi_csv) give up on anything
unusual and the full reader reads the file instead, error for error.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from gputui.collect.model import GpuSample, Job, ProcessInfo, Snapshot
from gputui.collect.procs.jobs import group_jobs

NAN = math.nan

# The readings held, in GpuSample's words: floats (NaN when absent) ...
FLOAT_ATTRS = (
    "util", "mem_util", "power_w", "power_limit_w", "mem_used_mb", "mem_total_mb",
    "temp_c", "sm_mhz", "mem_mhz",
)  # fmt: skip
# ... and whole numbers (None when absent).
INT_ATTRS = ("pstate", "events")


@dataclass
class Columns:
    """One entry per GPU line kept, in file order; `starts[k]` is sample k's first line."""

    t: array = field(default_factory=lambda: array("d"))  # the line's time
    gpu: array = field(default_factory=lambda: array("H"))  # its GPU index
    floats: dict[str, array] = field(default_factory=lambda: {a: array("d") for a in FLOAT_ATTRS})
    ints: dict[str, list[int | None]] = field(default_factory=lambda: {a: [] for a in INT_ATTRS})
    pids: list[tuple[int, ...]] = field(default_factory=list)  # shared tuples
    names: list[str | None] = field(default_factory=list)  # shared strings
    uuids: list[str | None] = field(default_factory=list)
    phases: list[str | None] = field(default_factory=list)
    starts: array = field(default_factory=lambda: array("l"))
    hostname: str | None = None
    # False when the file carries no process information at all (nvidia-smi's CSV; plain
    # lines none of which has `pids`): its Snapshots say so (Snapshot.readings_only)
    procs_listed: bool = True

    def __len__(self) -> int:
        return len(self.starts)


_new, _set = object.__new__, object.__setattr__


def _gpu_sample(d: dict[str, Any]) -> GpuSample:
    """A GpuSample with these fields, its __init__ skipped (it only stores them): 2 us
    less for each of a day's 200,000 GPUs. `d` holds every field."""
    g: Any = _new(GpuSample)
    _set(g, "__dict__", d)
    return g


class ColumnSnaps(Sequence[Snapshot]):
    """The samples of Columns as a read-only list of Snapshots, each built when indexed
    (and not kept). `times[k]` is sample k's time without building it."""

    def __init__(self, cols: Columns) -> None:
        self.cols = cols
        t, starts = cols.t, cols.starts
        self.times = array("d", [t[s] for s in starts])
        self.ends = array("l", list(starts[1:]) + [len(t)])  # one past sample k's last line
        # who -> jobs: the jobs depend on who the processes are (as the full reader keeps)
        self._jobs: dict[tuple[Any, ...], tuple[Job, ...]] = {}
        self._procs: dict[
            tuple[tuple[int, tuple[int, ...]], ...], tuple[tuple[ProcessInfo, ...], tuple[Job, ...]]
        ] = {}
        # The columns read for each GPU, in GpuSample's field order (looked up once, not
        # per sample: _build runs for every sample of a day)
        self._floats: list[tuple[str, array]] = [(a, cols.floats[a]) for a in FLOAT_ATTRS]
        self._ints: list[tuple[str, list[int | None]]] = [(a, cols.ints[a]) for a in INT_ATTRS]

    def __len__(self) -> int:
        return len(self.times)

    @overload
    def __getitem__(self, k: int) -> Snapshot: ...
    @overload
    def __getitem__(self, k: slice) -> list[Snapshot]: ...
    def __getitem__(self, k: int | slice) -> Snapshot | list[Snapshot]:
        if isinstance(k, slice):
            return [self._build(i) for i in range(*k.indices(len(self)))]
        n = len(self)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("sample index out of range")
        return self._build(k)

    def __iter__(self) -> Iterator[Snapshot]:
        for k in range(len(self)):
            yield self._build(k)

    def _build(self, k: int) -> Snapshot:
        c = self.cols
        lo, hi = c.starts[k], self.ends[k]
        index = c.gpu
        order = sorted(range(lo, hi), key=index.__getitem__)
        gpus = []
        floats, ints, pids = self._floats, self._ints, c.pids
        for i in order:
            d: dict[str, Any] = {"index": index[i], "name": c.names[i], "uuid": c.uuids[i]}
            for a, col in floats:
                v = col[i]
                d[a] = None if v != v else v
            for a, ints_col in ints:
                d[a] = ints_col[i]
            d["pids"] = pids[i]
            d["proc_mem_mb"] = ()
            d["mem_outside_mb"] = None
            d["na"] = {}
            gpus.append(_gpu_sample(d))
        processes, jobs = self._processes(tuple([(g.index, g.pids) for g in gpus]))
        return Snapshot(
            t=c.t[lo],
            gpus=tuple(gpus),
            processes=processes,
            jobs=jobs,
            source="replay",
            phase=c.phases[lo],  # the sample's first line, as the full reader has it
            hostname=c.hostname,
            readings_only=not c.procs_listed,
        )

    def _processes(
        self, key: tuple[tuple[int, tuple[int, ...]], ...]
    ) -> tuple[tuple[ProcessInfo, ...], tuple[Job, ...]]:
        """The processes NVML listed on the GPUs (index, pids) and their jobs; the same
        lists give equal processes, so both are kept by the lists (few: a job's lifetime)."""
        hit = self._procs.get(key)
        if hit is not None:
            return hit
        procs: dict[int, ProcessInfo] = {}
        for gi, pids in key:
            for pid in pids:
                p = ProcessInfo(pid=pid, gpus=(gi,), gpu_mem_mb=None, live=False)
                if pid in procs:  # one process on several GPUs
                    a = procs[pid]
                    p = ProcessInfo(pid=pid, gpus=tuple(sorted(set(a.gpus) | {gi})), live=False)
                procs[pid] = p
        got = tuple(sorted(procs.values(), key=lambda p: (p.gpus, p.pid)))
        who = tuple(
            (p.pid, p.gpus, p.rank, p.ppid, p.parent_cmd, bool(p.cmdline), p.env_error) for p in got
        )
        jobs = self._jobs.get(who)
        if jobs is None:
            jobs = group_jobs(got)
            if len(self._jobs) > 4096:
                self._jobs.clear()
            self._jobs[who] = jobs
        if len(self._procs) > 4096:
            self._procs.clear()
        self._procs[key] = (got, jobs)
        return got, jobs


class SnapsView(Sequence[Snapshot]):
    """Samples lo..hi-1 of a ColumnSnaps, built when indexed or iterated and not kept: the
    window of a moment whose spin began hours earlier holds no list of them (a 20,000 s
    hang at 4 Hz is 80,000 samples)."""

    def __init__(self, snaps: ColumnSnaps, lo: int, hi: int) -> None:
        self.snaps, self.lo, self.hi = snaps, lo, hi

    def __len__(self) -> int:
        return self.hi - self.lo

    @overload
    def __getitem__(self, k: int) -> Snapshot: ...
    @overload
    def __getitem__(self, k: slice) -> list[Snapshot]: ...
    def __getitem__(self, k: int | slice) -> Snapshot | list[Snapshot]:
        if isinstance(k, slice):
            return [self.snaps[self.lo + i] for i in range(*k.indices(len(self)))]
        n = len(self)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("sample index out of range")
        return self.snaps[self.lo + k]

    def __iter__(self) -> Iterator[Snapshot]:
        for k in range(self.lo, self.hi):
            yield self.snaps[k]
