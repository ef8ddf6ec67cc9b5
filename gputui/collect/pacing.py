"""The one pacing loop: "sample, then wait until the next tick", on absolute deadlines.

Every loop that samples at an interval (the dashboard's Sampler thread, `check`, `bundle`,
`record`) waits here. Waiting "the interval" after each sample would add the sample's own
time to every period, so a 0.5 s interval with a 20 ms sample drifts by 4 %; and waiting
"the interval minus the sample's time" drifts too, by the wake-up lateness of each wait.
Here tick k is due at `start + k * interval` whatever the samples took, so the lateness of
one tick never moves the next.

A tick that overruns (its work ends after one or more later ticks were due) skips those
ticks and waits for the next one still ahead: the loop never bursts to catch up, which
would sample a wedged GPU's backlog back to back. The interval is read from the Source at
every tick (`Source.next_delay()`), so a replay keeps the recording's own gaps: its deadlines
are chained (each tick due one gap after the previous one's deadline), still never from
"now". Every wait is on a `threading.Event`, so a stop ends it at once.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["JITTER_S", "Ticker", "lasted"]

# How far two ticks of a loop that keeps its interval may stray from whole intervals apart:
# each wakes up late by the scheduler's whim (milliseconds; 55 ms at the 99th percentile on a
# loaded 2-core box, BENCHMARKS.md section 19), and the lateness of the earlier tick shortens
# the period after it.
JITTER_S = 0.1


def lasted(elapsed: float, every: float) -> bool:
    """Whether `elapsed` seconds, measured between ticks of a paced loop, make `every`.

    A loop that drifted (`sleep(interval)` after each sample) measured every span a little
    longer than its ticks, so "every 2 s" at a 1 s interval came every second tick; on
    absolute deadlines two ticks are 2 s apart give or take the wake-up jitter, and a plain
    `>=` would make that every second or third tick at random. Spans within JITTER_S of
    `every` count as `every`.

    Args:
        elapsed: seconds since the last time (a monotonic difference).
        every: the period asked for, seconds.

    Returns:
        True when the period has passed.
    """
    return elapsed >= every - JITTER_S


class Ticker:
    """Deadlines for a sampling loop.

    `while ticker.wait(): sample()` samples at once, then on each tick until stopped.

    Args:
        interval: seconds between ticks: a number, or a function read at each tick (a
            Source's `next_delay`, so that a replay's gaps pace it).
        stop: set it to end the loop; a wait in progress ends at once. A fresh Event
            when not given (see `stop()`).
        start: monotonic time of tick 0 (the first `wait()` waits for it); default, the
            first `wait()` itself: the first tick is due at once.
        clock: the monotonic clock the deadlines are read on (tests inject one; the
            wait itself is `stop.wait`, so a test's Event advances that clock).
    """

    def __init__(
        self,
        interval: float | Callable[[], float],
        *,
        stop: threading.Event | None = None,
        start: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = interval if callable(interval) else (lambda: float(interval))
        self._event = stop if stop is not None else threading.Event()
        self._clock = clock
        self._due: float | None = start  # the deadline of the next tick
        self._last: float | None = None  # the deadline of the tick last given
        self._step = 0.0  # the interval after it
        self.skipped = 0  # ticks passed over because the work overran them

    @property
    def stopped(self) -> bool:
        return self._event.is_set()

    def stop(self) -> None:
        """End the loop: a `wait()` in progress, or the next, returns False at once."""
        self._event.set()

    def due(self, at_least: float = 0.0) -> float:
        """The monotonic time the next tick is due (overrun ticks skipped), not waiting.

        Args:
            at_least: the next tick is no sooner than this many seconds from now (the
                Sampler backs off a failing source by a second).

        Returns:
            The deadline `wait()` would wait for.
        """
        now = self._clock()
        if self._due is None:
            if self._last is None:
                self._due = now  # tick 0: at once
            else:
                self._step = max(0.0, self._interval())  # read once a tick
                self._due = self._last + self._step
        earliest = now + at_least
        if self._due < earliest and self._last is not None:
            step = self._step
            if step <= 0.0:
                self._due = earliest  # no interval (a replay as fast as it reads): no grid
            else:
                missed = math.ceil((earliest - self._due) / step)
                self._due += missed * step
                self.skipped += missed
        return self._due

    def wait(self, at_least: float = 0.0) -> bool:
        """Wait for the next tick.

        Args:
            at_least: do not tick sooner than this many seconds from now; the ticks in
                between are skipped, the grid is kept.

        Returns:
            True at the tick; False as soon as the loop is stopped.
        """
        due = self.due(at_least)
        while not self._event.is_set():
            left = due - self._clock()
            if left <= 0:
                break
            self._event.wait(left)
        if self._event.is_set():
            return False
        self._last, self._due = due, None
        return True
