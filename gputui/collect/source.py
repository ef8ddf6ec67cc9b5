"""Where snapshots come from: live NVML + psutil, or a recorded trace.

A Source is pulled by exactly one thread (the Sampler, or a CLI loop). `sample()` may block
(NVML can stall when a GPU falls off the bus), which is why the UI never calls it itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gputui.collect.model import Snapshot
from gputui.collect.procs.jobs import group_jobs
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.collect.trace.read import TraceReader


class Source(Protocol):
    kind: str  # "nvml", "host" or "replay"
    description: str  # one line for the header, e.g. "live NVML, 2 GPUs" or "replay demo.jsonl"

    def sample(self) -> Snapshot | None:
        """The next snapshot; None when a replay has run out."""

    def next_delay(self) -> float:
        """Seconds to wait before the next `sample()`."""

    def close(self) -> None: ...


DEMO_FILE = "demo-h200x2-hang.jsonl.gz"
# Where the demo starts: DEMO_LEAD_S before the stall_in_loop job's first process appears on
# the recording, so it trains at once and its stall is called about 15 s in (the detector
# needs 10 s of spinning); it started 8 s before that job's phase, and the first stop came 26 s
# in, all of it "OK no hang".
DEMO_START_PHASE = "stall_in_loop_init"
DEMO_LEAD_S = 2.0
# The longest a real-time replay waits between two samples, whatever the file's gap and the
# speed: a recording paused for a day must not make the replay sleep for a day (or overflow
# a timer), and an hour is longer than any gap worth watching in real time.
MAX_REPLAY_DELAY_S = 3600.0


def demo_path() -> Path:
    """The bundled real 2 x H200 recording (see gputui/data/README.md).

    Returns:
        The path of the recording `--demo` replays, inside the installed package.
    """
    from importlib import resources  # here: the live start-up path does not need it

    return Path(str(resources.files("gputui") / "data" / DEMO_FILE))


def demo_offset(snaps: list[Snapshot]) -> float:
    """Seconds into the demo file where `gputui --demo` starts (DEMO_LEAD_S before the
    stall_in_loop job's first process)."""
    return max(0.0, job_start(snaps, DEMO_START_PHASE) - snaps[0].t - DEMO_LEAD_S)


def job_start(snaps: list[Snapshot], phase: str) -> float:
    """When the job of a recorded `phase` shows its first process (the phase's start when
    none does; the file's start when no sample has the phase).

    Args:
        snaps: the recording's samples, oldest first.
        phase: a phase label the recording's samples carry (its ground truth).

    Returns:
        The sample's time (Unix seconds).
    """
    mine = [s for s in snaps if s.phase == phase]
    first = next((s for s in mine if s.processes), mine[0] if mine else snaps[0])
    return first.t


class ReplaySource:
    """Plays a recorded trace. `realtime=False` returns samples back to back (for `check`)."""

    kind = "replay"

    def __init__(
        self,
        snaps: list[Snapshot] | Sequence[Snapshot],  # a Sequence: gputui.collect.trace.columns
        name: str = "trace",
        speed: float = 1.0,
        start_s: float = 0.0,
        realtime: bool = True,
    ) -> None:
        if not speed > 0 or speed == float("inf"):
            raise GputuiError("--speed must be a positive number")
        if not snaps:
            raise GputuiError(f"{name}: no samples to replay")
        self.snaps = snaps
        self.speed = speed
        self.realtime = realtime
        # A recording held as columns (gputui.collect.trace.columns) has its times without
        # building its samples: the start is found from them.
        times = getattr(snaps, "times", None) or [s.t for s in snaps]
        t0 = times[0]
        self.pos = next((i for i, t in enumerate(times) if t - t0 >= start_s), len(snaps) - 1)
        self.description = f"replay {name}"
        self._delay = 0.0
        self._lazy: _LazyRead | None = None  # a file still being read (from_file, lazy)
        # What the reader skipped (records of the wrong shape), one line each, for the faces
        # to say once (gputui.collect.trace.read.TraceReader.notes).
        self.notes: list[str] = []
        # The recorded node's name, the same in every face (check, exporter, bundle):
        # the recording's own hostname, else (from_file) its file name without extensions.
        host = getattr(snaps, "cols", None)
        self.node: str = (
            (host.hostname or "")
            if host is not None
            else next((s.hostname for s in snaps if s.hostname), None) or ""
        )

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        speed: float = 1.0,
        start_s: float = 0.0,
        realtime: bool = True,
        lazy: bool = False,
    ) -> ReplaySource:
        """A recording's replay. `lazy` (the dashboard): the file is read on in a thread
        while it plays, from as soon as its first samples (up to `start_s`) are in, so a
        day-long recording shows its first frame at once; a damaged line found later ends
        the replay there, said once by sample()."""
        from gputui.collect.hostlist import host_from_name
        from gputui.collect.trace.read import TraceReader, shown

        name = shown(Path(path).name)
        from gputui.collect.trace.fast import read_columns

        cols = read_columns(path)  # readings alone: columns, each sample built when played
        if cols is not None:
            from gputui.collect.trace.columns import ColumnSnaps

            src = cls(ColumnSnaps(cols), name, speed=speed, start_s=start_s, realtime=realtime)
            if not cols.hostname:
                src.node = shown(host_from_name(str(path)))
            return src
        reader = TraceReader(path)
        feed = _LazyRead(reader) if lazy else None
        snaps = feed.until(start_s) if feed is not None else reader.read()
        src = cls(snaps, name, speed=speed, start_s=start_s, realtime=realtime)
        src._lazy = feed
        if feed is None:
            src.notes = reader.notes()
        if not any(s.hostname for s in src.snaps[:1]):
            src.node = shown(host_from_name(str(path)))
        return src

    @classmethod
    def demo(
        cls,
        into_demo_s: float | None = None,
        *,
        speed: float = 1.0,
        start_s: float | None = None,
        realtime: bool = True,
    ) -> ReplaySource:
        """The bundled recording. `start_s` counts from the file's first sample;
        `into_demo_s` (what `--demo --start S` gives) from where the demo starts."""
        from gputui.collect.trace.read import read_trace

        snaps = read_trace(demo_path())
        if start_s is None:
            start_s = demo_offset(snaps) + (into_demo_s or 0.0)
        name = "demo: 2 x H200 NCCL hang"
        src = cls(snaps, name, speed=speed, start_s=start_s, realtime=realtime)
        if not any(s.hostname for s in snaps):
            src.node = DEMO_FILE.split(".", 1)[0]  # demo-h200x2-hang, as `check --demo` says
        return src

    @property
    def finished(self) -> bool:
        lazy = self._lazy
        return self.pos >= len(self.snaps) and (lazy is None or lazy.done.is_set())

    def sample(self) -> Snapshot | None:
        lazy = self._lazy
        if lazy is not None:
            # This sample, and in real time the next as well: its time is this one's delay
            # (a player that catches up with the reader waits for it, not past the list).
            lazy.wait_for(self.pos + (2 if self.realtime else 1))
            if self.pos >= len(self.snaps) and lazy.error is not None:
                err, lazy.error = lazy.error, None
                raise err  # said once (the sampler tells it); the replay ends here
            if lazy.done.is_set() and not self.notes:
                self.notes = lazy.reader.notes()
        if self.pos >= len(self.snaps):
            return None
        snap = self.snaps[self.pos]
        self.pos += 1
        if self.realtime and self.pos < len(self.snaps):
            times = getattr(self.snaps, "times", None)  # columns: the time without the sample
            nxt = times[self.pos] if times is not None else self.snaps[self.pos].t
            gap = (nxt - snap.t) / self.speed
            self._delay = min(MAX_REPLAY_DELAY_S, max(0.0, gap))
        else:
            self._delay = 0.0
        return snap

    def next_delay(self) -> float:
        return self._delay

    def close(self) -> None:
        if self._lazy is not None:
            self._lazy.stop.set()


class _LazyRead:
    """A TraceReader run in a daemon thread, its snapshot list growing as it reads."""

    POLL_S = 0.02

    def __init__(self, reader: TraceReader) -> None:
        import threading

        self.reader = reader
        self.done = threading.Event()
        self.stop = threading.Event()
        self.error: GputuiError | None = None
        self.thread = threading.Thread(target=self._run, name="gputui-replay-read", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.reader.read(stop=self.stop)
        except GputuiError as e:
            self.error = e
        except Exception as e:  # a bug: the replay ends with it said, the dashboard stays
            self.error = GputuiError(f"reading the recording failed: {type(e).__name__}: {e}")
        finally:
            self.done.set()

    def wait_for(self, n: int) -> None:
        """Until `n` samples are in, or the file is read (or failed)."""
        while len(self.reader.snaps) < n and not self.done.wait(self.POLL_S):
            pass

    def until(self, start_s: float) -> list[Snapshot]:
        """The growing list, once it holds the sample at `start_s` (or the file is read).
        An error before the first sample is the file's error, raised here."""
        snaps = self.reader.snaps
        while not self.done.is_set():
            if snaps and snaps[-1].t - snaps[0].t >= start_s:
                break
            self.done.wait(self.POLL_S)
        if not snaps:
            self.done.wait()
            if self.error is not None:
                raise self.error
            raise GputuiError(f"{self.reader.path}: no samples in file")
        return snaps


def filter_gpus(snap: Snapshot, keep: frozenset[int]) -> Snapshot:
    """The snapshot as if the node had only the GPUs in `keep` (their processes, their jobs).

    A process on several GPUs keeps only the kept ones; jobs are grouped again, so a job
    that spans GPUs 0 and 1 is, on the node watched as `--gpus 1`, the job of GPU 1 alone.

    Args:
        snap: one sample of the whole node.
        keep: the GPU indices to keep (`--gpus`).

    Returns:
        A new Snapshot with only those GPUs, their processes and their jobs grouped again.
    """
    from dataclasses import replace

    gpus = tuple(g for g in snap.gpus if g.index in keep)
    procs = tuple(
        replace(p, gpus=tuple(i for i in p.gpus if i in keep))
        for p in snap.processes
        if any(i in keep for i in p.gpus)
    )
    return replace(snap, gpus=gpus, processes=procs, jobs=group_jobs(procs))


class NoSuchGpus(GputuiError):
    """--gpus names none of the node's GPUs: bad input (exit 2), not NVML in trouble."""


class FilteredSource:
    """Another source, seen through `--gpus`: only those GPU indices are watched."""

    def __init__(self, inner: Source, gpus: tuple[int, ...]) -> None:
        self.inner = inner
        self.keep = frozenset(gpus)
        self.kind = inner.kind
        self.description = f"{inner.description}, GPUs {','.join(map(str, sorted(gpus)))} only"
        self.seen: tuple[int, ...] = ()  # GPU indices the inner source had, at the last sample

    def sample(self) -> Snapshot | None:
        snap = self.inner.sample()
        if snap is None:
            return None
        self.seen = tuple(g.index for g in snap.gpus)
        if self.seen and not self.keep & set(self.seen):
            # The one rule of every face (gputui.commands.common.require_gpus): a list that
            # names none of the node's GPUs is a mistake, said, never an empty view.
            listed = ",".join(map(str, sorted(self.keep)))
            have = ", ".join(map(str, self.seen))
            raise NoSuchGpus(f"--gpus {listed}: this node has GPUs {have}")
        return filter_gpus(snap, self.keep)

    def next_delay(self) -> float:
        return self.inner.next_delay()

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)  # e.g. ReplaySource.finished for the app
