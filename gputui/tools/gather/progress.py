"""Whether the rank the others wait for advances: its counters and its frames, from the
start of a spin (gputui.diagnose.hang.progress judges them).

Why from the start: a checkpoint writer and a stuck rank look alike to NVML, and the verdict
at `--stall-after` must already know which it is, or `check` would raise the alarm and exit
1 for every checkpoint. So while a job's GPUs spin, the Watcher hands this poller the job's
ranks that do not spin (the suspects to be), and those RAS names as behind; the poller reads
their CPU time and I/O bytes from /proc at every sample (cheap: two small reads each, off
the caller's thread) and, for the ranks that do not spin, takes a py-spy dump every DUMP_S
seconds after the spin has lasted DUMP_AFTER_S (py-spy pauses the process for a few ms; a
rank in a brief wait of a healthy step is never dumped). Every RECORD_S seconds it emits one
`progress` record with the readings of the last window and the dumps in it, each marked
`moved` when its main thread's functions differ from the dump before (lines are not
compared: a loop on one line is seen on either of two): the record holds everything the
judge reads, so `gputui record` keeps it and a replay judges the same.

Bounded: one task in flight at a time, each py-spy bounded by DUMP_TIMEOUT_S, at most
MAX_RANKS ranks per job; nothing is kept once the spin ends.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputui.collect.model import ProcessInfo
from gputui.collect.pacing import lasted
from gputui.collect.procs.progress import Counters, read_counters
from gputui.tools.episodes import EpisodeWorker

KIND = "progress"
RECORD_S = 2.0  # a record this often while a job spins
DUMP_S = 2.0  # a py-spy dump of each rank that does not spin this often ...
DUMP_AFTER_S = 2.0  # ... once the spin has lasted this long (a brief wait: never)
DUMP_TIMEOUT_S = 3.0
READ_EVERY_S = 0.4  # counters at most this often (a fast sampler does not read more)
WINDOW_S = 12.0  # readings kept (the judge's window is 10 s)
MAX_RANKS = 16
MAX_DUMPS = 8
MAX_FUNCTIONS = 12  # innermost: what the words look for (save, compile, eval)
MAX_SEEN = 256  # distinct main-thread stacks remembered per rank in one spin
MIN_SPAN_S = 1.6  # readings spanning this long before the first record (the judge's 1.5 s)


@dataclass(frozen=True)
class Watched:
    """A rank to follow: its process, GPU, and whether to dump it (it does not spin)."""

    process: ProcessInfo
    gpu: int | None
    dump: bool


@dataclass
class _Rank:
    first: Counters | None = None
    readings: deque[Counters] = field(default_factory=lambda: deque(maxlen=64))
    dumps: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_DUMPS))
    last_sig: str | None = None  # the functions of the main thread at the last dump
    seen: set[str] = field(default_factory=set)  # every such signature of this episode
    last_dump: float = float("-inf")
    rank: int | None = None
    gpu: int | None = None
    error: str | None = None


@dataclass
class _Episode:
    started: float  # monotonic: when the spin was first handed over
    trigger: str = "spin"
    ranks: dict[int, _Rank] = field(default_factory=dict)
    watched: tuple[Watched, ...] = ()
    last_record: float = float("-inf")
    last_read: float = float("-inf")


class ProgressPoller(EpisodeWorker[_Episode]):
    """Follows the ranks of spinning jobs; `emit(record)` receives each progress record."""

    def __init__(
        self,
        emit: Callable[[dict[str, Any]], None],
        cancel: threading.Event,
        *,
        stacks: bool = True,
        dump: Callable[..., Any] | None = None,
    ) -> None:
        super().__init__("gputui-progress")
        self.emit, self.cancel, self.stacks = emit, cancel, stacks
        self._dump = dump

    def poll(self, key: str, watched: Sequence[Watched], trigger: str) -> None:
        """Called each sample for a job whose GPUs spin; never blocks."""
        now = time.monotonic()
        with self._lock:
            ep = self._episodes.get(key)
            if ep is None:
                ep = self._episodes[key] = _Episode(now)
            ep.trigger = trigger
            ep.watched = tuple(w for w in watched if w.process.live)[:MAX_RANKS]
        if self.cancel.is_set() or not ep.watched or self.pending():
            return
        if not lasted(now - ep.last_read, READ_EVERY_S):
            return
        ep.last_read = now
        self._submit(self._step, key, ep)

    # ------------------------------------------------------------ the worker thread

    def _step(self, key: str, ep: _Episode) -> None:
        try:
            now = time.monotonic()
            t = time.time()
            for w in ep.watched:
                r = ep.ranks.setdefault(w.process.pid, _Rank())
                r.rank = w.process.rank.rank if w.process.rank is not None else None
                r.gpu = w.gpu
                c = read_counters(w.process.pid, t)
                if c is None:
                    r.error = "its /proc entry could not be read (gone, or another user's)"
                    continue
                if r.first is not None and r.first.start_ticks != c.start_ticks:
                    r.first = None  # a reused pid: another process
                    r.readings.clear()
                r.first = r.first or c
                r.readings.append(c)
                while r.readings and r.readings[0].t < t - WINDOW_S:
                    r.readings.popleft()
                spun = now - ep.started
                # Ticks of the caller's paced loop: spans of whole intervals, give or take
                # their wake-up jitter (gputui.collect.pacing.lasted).
                if (
                    self.stacks
                    and w.dump
                    and lasted(spun, DUMP_AFTER_S)
                    and lasted(now - r.last_dump, DUMP_S)
                ):
                    r.last_dump = now
                    self._dump_one(w.process, r)
                if self.cancel.is_set():
                    return
            if lasted(now - ep.last_record, RECORD_S) and any(
                r.readings and r.readings[-1].t - r.readings[0].t >= MIN_SPAN_S
                for r in ep.ranks.values()
            ):  # a first record that is judged already (a replay sees records a sample late)
                ep.last_record = now
                self.emit(self._record(key, ep, t))
        except Exception as e:  # a poller never raises: its failure is the record
            rec = {"type": KIND, "t": round(time.time(), 3), "job": key, "ranks": []}
            rec["error"] = f"{type(e).__name__}: {e}"[:200]
            if not self.cancel.is_set():
                self.emit(rec)

    def _dump_one(self, p: ProcessInfo, r: _Rank) -> None:
        from gputui.collect.frames import main_thread
        from gputui.diagnose.hang.children import waits_on_child
        from gputui.diagnose.hang.culprit import read_stack
        from gputui.diagnose.hang.threads import holder_of
        from gputui.redact import redact_text
        from gputui.tools.attach.dumpall import parse_py_spy
        from gputui.tools.attach.stacks import py_spy_dump

        dump = self._dump or py_spy_dump
        t = time.time()
        res = dump(p, timeout=DUMP_TIMEOUT_S, cancel=self.cancel)
        if not res.ok:
            r.dumps.append({"t": round(t, 3), "outcome": str(res.outcome.value)})
            return
        threads = parse_py_spy(res.lines)
        mt = main_thread(threads)
        frames = tuple(f for f in (mt.frames if mt else ()) if not f.function.startswith("0x"))
        # Functions, not lines: a `while True: pass` is seen on either of its two lines.
        sig = "|".join(f"{f.function}@{f.file}" for f in frames)
        moved = r.last_sig is not None and sig != r.last_sig  # the first dump is the baseline
        reading = read_stack(frames)
        frame = reading.frame
        # New: its innermost user function is one this spin never stood in before. A loop
        # polling a flag stays in its own function (`poll_ready`, with or without the
        # library's `is_set` under it): its stack moves, never to new code of its own;
        # generated kernels or a phase that advances keep reaching new code. A long phase in
        # a library under one user line (torch.compile, torch.save) is told by its names.
        own = f"{frame.function}@{frame.file}" if frame is not None else sig
        new = moved and own not in r.seen
        r.last_sig = sig
        if len(r.seen) < MAX_SEEN:
            r.seen.add(own)
        entry: dict[str, Any] = {
            "t": round(t, 3),
            "outcome": "done",
            "moved": moved,
            "new": new,
            "frame": redact_text(frame.label())[:300] if frame is not None else None,
            "functions": [redact_text(f.function)[:120] for f in frames[:MAX_FUNCTIONS]],
        }
        main_runs = mt is not None and mt.gil
        holder = None if main_runs else holder_of([x for x in threads if x is not mt], frames)
        if holder is not None:  # the side thread that keeps the main thread from moving
            entry["holder"] = redact_text(holder.name)[:120]
            entry["holder_frame"] = redact_text(holder.frame.label())[:300]
            entry["holder_gil"] = holder.gil
            entry["waits_in"] = reading.collective
        if waits_on_child(frames):  # on a queue, a pipe, a future: its children feed it
            entry.update(self._stuck_child(p, frames))
        r.dumps.append(entry)

    def _stuck_child(self, p: ProcessInfo, frames: tuple[Any, ...]) -> dict[str, Any]:
        """The child its main thread waits for that stands in its own code, for the judge:
        {"child": pid, "child_role": ..., "child_frame": ...}, or nothing."""
        from gputui.collect.frames import RankStack
        from gputui.diagnose.hang.children import stuck_child
        from gputui.redact import redact_text
        from gputui.tools.attach.children import dump_children
        from gputui.tools.attach.dumpall import parse_py_spy
        from gputui.tools.attach.stacks import py_spy_dump

        dump = self._dump or py_spy_dump
        kids = dump_children(
            p.pid,
            lambda pid, **kw: dump(pid, **kw),
            timeout=DUMP_TIMEOUT_S,
            cancel=self.cancel,
            parse=parse_py_spy,
        )
        found = stuck_child(RankStack(p.pid, None, None, "done", frames, children=kids))
        if found is None:
            return {}
        return {
            "child": found.child.pid,
            "child_role": redact_text(found.child.role)[:120],
            "child_frame": redact_text(found.frame.label())[:300],
        }

    def _record(self, key: str, ep: _Episode, t: float) -> dict[str, Any]:
        ranks = []
        for pid, r in list(ep.ranks.items())[:MAX_RANKS]:
            e: dict[str, Any] = {"pid": pid, "rank": r.rank, "gpu": r.gpu}
            if r.first is not None:
                e["first"] = [r.first.to_json()]
            e["samples"] = [c.to_json() for c in r.readings]
            e["dumps"] = [d for d in r.dumps if d["t"] >= t - WINDOW_S]
            if r.error and not r.readings:
                e["error"] = r.error
            ranks.append(e)
        return {
            "type": KIND,
            "t": round(t, 3),
            "job": key,
            "trigger": ep.trigger,
            "stacks": "py-spy" if self.stacks else "off",
            "ranks": ranks,
        }
