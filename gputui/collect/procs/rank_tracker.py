"""The rank tracker: where the ranks of jobs write, looked at off the sampling thread.

Why a thread of its own: looking at a rank reads /proc (its fds, its environment, its
files) and a log's tail; the sampler and the UI must never wait on that. `observe(snap)`
hands a look to one worker at most every few seconds, and at once for a rank not known yet
(it may die 3 s later); `final(pid)` reads a gone rank's file once more. What is looked at
and how: gputui.collect.procs.rankio.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from gputui.collect.procs.rankio import RankIO, core_pattern, refresh_tail, resolve

__all__ = ["KEEP_GONE_S", "MAX_TRACKED", "REFRESH_S", "RankIOTracker"]

REFRESH_S = 3.0  # how often the ranks are looked at
KEEP_GONE_S = 600.0  # how long a gone rank's facts are kept
MAX_TRACKED = 512


def _ranks_of(snap: Any) -> list[tuple[int, float | None, int | None, str]]:
    """(pid, create time, rank, job key) of every live process of a job (a child of a
    launcher with no RANK variable is a rank too, of unknown number)."""
    jobs = {p: j.key for j in getattr(snap, "jobs", ()) for p in j.pids}
    return [
        (p.pid, p.create_time, p.rank.rank if p.rank is not None else None, jobs[p.pid])
        for p in getattr(snap, "processes", ())
        if p.live and p.pid in jobs
    ][:MAX_TRACKED]


@dataclass
class RankIOTracker:
    """Remembers where the ranks of jobs write. `observe(snap)` is called per sample and
    never blocks: at most every `every` s it hands a refresh to its own worker thread."""

    every: float = REFRESH_S
    known: dict[int, RankIO] = field(default_factory=dict)
    pattern: str | None = None
    _last: float = 0.0
    _idle: threading.Event = field(default_factory=threading.Event)  # clear: a look runs
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: bool = False

    def __post_init__(self) -> None:
        self._idle.set()  # no look under way yet

    def observe(self, snap: Any) -> None:
        """A refresh every `every` s, and at once when a rank not known yet is here: a rank
        seen alive in one sample has where it writes remembered (it may die 3 s later)."""
        now = time.monotonic()
        if self._closed or not self._idle.is_set():
            return
        ranks = _ranks_of(snap)
        with self._lock:
            new = any(pid not in self.known for pid, *_ in ranks)
        if not new and now - self._last < self.every:
            return
        if not ranks and not self.known:
            return
        self._last = now
        self._idle.clear()
        # A daemon thread, not an executor's: quitting never waits for a look at /proc
        threading.Thread(
            target=self._refresh, args=(ranks,), name="gputui-rankio", daemon=True
        ).start()

    def _refresh(self, ranks: list[tuple[int, float | None, int | None, str]]) -> None:
        try:
            if self.pattern is None:
                self.pattern = core_pattern() or ""
            for pid, ct, rank, job in ranks:
                with self._lock:
                    old = self.known.get(pid)
                # A rank listed with no start time (it exited: the host has no /proc for
                # it) keeps what was learnt while it lived; a new start time is a new process
                if old is None or (ct is not None and old.create_time != ct):
                    old = resolve(pid, ct, rank, job)
                elif old.error is None and ct is not None:
                    old = replace(old, seen=time.time())
                new = refresh_tail(old)
                with self._lock:
                    self.known[pid] = new
            self._forget()
        finally:
            self._idle.set()

    def _forget(self) -> None:
        horizon = time.time() - KEEP_GONE_S
        with self._lock:
            for pid in [p for p, io in self.known.items() if io.seen and io.seen < horizon]:
                del self.known[pid]
            while len(self.known) > MAX_TRACKED:
                del self.known[min(self.known, key=lambda p: self.known[p].seen)]

    def settle(self, timeout: float) -> bool:
        """Wait, at most `timeout` s, for the refresh under way (`check` does before its
        first line: a rank that dies after that line has where it wrote remembered, not
        "its process has exited"). True when none runs."""
        return self._idle.wait(timeout)

    def refresh_now(self, snap: Any) -> None:
        """Synchronously (tests, a one-shot CLI): look at the ranks of `snap` now."""
        self._refresh(_ranks_of(snap))

    def of_job(self, job: str) -> list[RankIO]:
        with self._lock:
            return [io for io in self.known.values() if io.job == job]

    def get(self, pid: int) -> RankIO | None:
        with self._lock:
            return self.known.get(pid)

    def final(self, pid: int) -> RankIO | None:
        """The rank's facts with its log file read once more (its last words come last)."""
        io = self.get(pid)
        return None if io is None else refresh_tail(io)

    def close(self) -> None:
        self._closed = True  # a look under way ends on its own; none starts after
