"""A replay that starts over when it ends, for a demo exporter that stays up for days.

Each pass is shifted forward in time by the length of the passes before it, so the
detector sees time go on (a hang in the second pass is a new hang, not a jump backwards)
and Prometheus sees the same alerts fire and clear again on every pass.
"""

from __future__ import annotations

from dataclasses import replace

from gputui.collect.model import Snapshot
from gputui.collect.source import ReplaySource


class LoopingSource:
    kind = "replay"

    def __init__(self, inner: ReplaySource) -> None:
        self.inner = inner
        self.description = f"{inner.description}, looping"
        self._start = inner.pos
        snaps = inner.snaps[self._start :]
        # One typical sample interval between the last sample of a pass and the first of
        # the next, so the pass boundary looks like any other tick.
        steps = sorted(b.t - a.t for a, b in zip(snaps, snaps[1:], strict=False))
        self._step = steps[len(steps) // 2] if steps else 1.0
        self._span = (snaps[-1].t - snaps[0].t if snaps else 0.0) + self._step
        self._offset = 0.0
        self.passes = 1

    def sample(self) -> Snapshot | None:
        snap = self.inner.sample()
        if snap is None:
            self.inner.pos = self._start
            self._offset += self._span
            self.passes += 1
            snap = self.inner.sample()
            if snap is None:
                return None
        return replace(snap, t=snap.t + self._offset) if self._offset else snap

    def next_delay(self) -> float:
        if self.inner.finished and self.inner.realtime:
            return self._step / self.inner.speed
        return self.inner.next_delay()

    def close(self) -> None:
        self.inner.close()
