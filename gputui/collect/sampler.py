"""The one poll loop: a single thread pulls snapshots from a Source and hands them on.

The next poll is scheduled only after the previous one returned, so polls never overlap; if
NVML blocks (a GPU fell off the bus), this thread blocks and nothing else does: the UI keeps
running and shows the growing age of the newest snapshot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gputui.collect.model import Snapshot
from gputui.collect.pacing import Ticker
from gputui.collect.source import Source

# After a sample that failed, the next is at least this far off: a source that fails at once
# (NVML gone) must not be asked again on every tick of a short interval.
ERROR_BACK_OFF_S = 1.0
# While paused, the next look is at least this far off (at a 1 s interval: the next tick).
PAUSED_LOOK_S = 0.2


class Sampler:
    def __init__(
        self,
        source: Source,
        on_snapshot: Callable[[Snapshot], object],
        on_end: Callable[[], object] | None = None,
        on_error: Callable[[BaseException], object] | None = None,
    ) -> None:
        self.source = source
        self.on_snapshot = on_snapshot
        self.on_end = on_end
        self.on_error = on_error
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._first_delay = 0.0
        self._first: Snapshot | None = None
        self._started = 0.0
        self._thread = threading.Thread(target=self._loop, name="gputui-sampler", daemon=True)

    def start(self, delay: float = 0.0, first: Snapshot | None = None) -> None:
        """Start sampling; `delay`: wait this long first (a first sample was taken already).
        `first`, that sample: handed on by this thread before the wait, so what the
        consumer does with it (the detector, the evidence watcher) stays off the caller's
        thread."""
        self._first_delay = delay
        self._first = first
        self._started = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """Ask the loop to end; never waits on a sampler blocked inside NVML."""
        self._stop.set()

    def pause(self, paused: bool) -> None:
        if paused:
            self._paused.set()
        else:
            self._paused.clear()

    @property
    def paused(self) -> bool:
        return self._paused.is_set()

    def _loop(self) -> None:
        first, self._first = self._first, None
        if first is not None and not self._stop.is_set():
            self._hand_on(first)
        # Tick 0 is counted from start(), the first sample's hand-off included; then one
        # tick per interval on absolute deadlines (gputui.collect.pacing).
        start = self._started + self._first_delay if self._first_delay else None
        ticker = Ticker(self.source.next_delay, stop=self._stop, start=start)
        back_off = 0.0
        while ticker.wait(back_off):
            back_off = 0.0
            if self._paused.is_set():  # the tick passes unsampled, a later one looks again
                back_off = PAUSED_LOOK_S  # (a replay's gap may be 0: never a busy loop)
                continue
            try:
                snap = self.source.sample()
            except Exception as e:  # keep sampling: one bad tick must not end the dashboard
                if self.on_error:
                    self.on_error(e)
                back_off = ERROR_BACK_OFF_S
                continue
            if snap is None:
                if self.on_end:
                    self.on_end()
                return
            if self._stop.is_set():
                return
            self._hand_on(snap)

    def _hand_on(self, snap: Snapshot) -> None:
        try:
            self.on_snapshot(snap)
        except Exception as e:  # a bug downstream (detector, UI hand-off) must be seen,
            if self.on_error:  # not end sampling silently with a frozen dashboard
                self.on_error(e)
