"""Each GPU's busy samples over the wait-share windows (gputui.diagnose.slow.straggler).

Apart from the rule because it runs for every GPU of every sample (the dashboard's tick, a
day-long replay's 200,000 GPU lines): one call per GPU per sample notes the sample in both
windows and trims both, with running counts, so a share is O(1) to read.
"""

from __future__ import annotations

from collections import deque


class Counted:
    """Busy samples (time, waiting?) over a time window, with a running count of waits."""

    __slots__ = ("horizon", "items", "waits")

    def __init__(self, horizon: float) -> None:
        self.horizon = horizon
        self.items: deque[tuple[float, bool]] = deque()
        self.waits = 0


class GpuHistory:
    """One GPU's busy samples since its job came: over the whole window and the recent one.

    `pids`: the GPU's processes at its last sample with any (a disjoint set is a new job).
    `src`: the pid tuple `pids` was made from; a sample with an equal tuple (the same
    processes, mostly the very same tuple) leaves `pids` as it is, without making a set.
    """

    __slots__ = ("pids", "src", "since", "window", "recent")

    def __init__(self, pids: tuple[int, ...], since: float, window_s: float, recent_s: float):
        self.pids = frozenset(pids)
        self.src = pids
        self.since = since  # first sample of this job on the GPU
        self.window = Counted(window_s)
        self.recent = Counted(recent_s)

    def same_pids(self, pids: tuple[int, ...]) -> bool:
        """`pids` is the tuple `self.pids` was made from (by identity, else equality)."""
        return pids is self.src or pids == self.src

    def set_pids(self, pids: tuple[int, ...]) -> None:
        self.pids, self.src = frozenset(pids), pids

    def note(self, t: float, waiting: bool | None) -> None:
        """A sample at `t`: counted in both windows when busy (`waiting` not None), and
        both windows trimmed to their horizons (written out inline: this runs for every
        GPU of every sample)."""
        for c in (self.window, self.recent):
            items = c.items
            if waiting is not None:
                items.append((t, waiting))
                c.waits += waiting
            cut = t - c.horizon
            while items and items[0][0] < cut:
                c.waits -= items.popleft()[1]

    def note_many(self, notes: list[tuple[float, bool | None]]) -> None:
        """`note(t, waiting)` for each of `notes` in time order, with one trim at the last
        time: the horizon only moves forward, so what one trim at the end removes is what a
        trim after each note would have removed (a replay's quiet run of samples, noted at
        once; nothing reads the shares in between)."""
        if not notes:
            return
        busy = [(t, w) for t, w in notes if w is not None]
        waits = sum(w for _t, w in busy)
        t_last = notes[-1][0]
        for c in (self.window, self.recent):
            items = c.items
            items.extend(busy)
            c.waits += waits
            cut = t_last - c.horizon
            while items and items[0][0] < cut:
                c.waits -= items.popleft()[1]

    def shares(self) -> tuple[float, float]:
        """The wait share (0.0 when empty) of the window and of the recent part, in one call."""
        w, r = self.window, self.recent
        n, m = len(w.items), len(r.items)
        return (w.waits / n if n else 0.0), (r.waits / m if m else 0.0)
