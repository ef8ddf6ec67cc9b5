"""One sample's code, read straight from a recording held as columns: what the detector
would read of it, with no Snapshot built.

Why: a replay of a day of a node runs the detector over some 100,000 samples, and in most of
them (95 % of a churning node's 7-hour history) nothing moves that the detector could act
on: the same processes on the same GPUs, the same GPUs in use, no GPU spinning or waiting.
Building each such sample as a Snapshot and judging it costs ~75 us; reading this code from
the columns costs a few. A replay that finds a sample's quiet key (`quiet_key`) equal to the
one before, with the watcher settled (gputui.watch.run.QuietSteps), skips the sample's full
step.

The code is, per GPU in index order: its index, its processes (the reader's shared tuple),
whether it spins (gputui.diagnose.hang.classify, node rule included), its wait code
(gputui.diagnose.slow.straggler.is_waiting, measured against the busiest GPU of its job: the
note its wait-share windows take) and whether its readings say it is in use
(gputui.diagnose.job_groups.in_use, the grouping of files that list no process). Each part
is computed by the very functions the detector calls, on GpuSamples holding the same
readings as the Snapshot's (tests/test_quiet_step.py compares both, sample by sample, over
every recording read as columns).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from operator import and_, eq, ge, ne, or_
from typing import Any

from gputui.collect.model import GpuSample
from gputui.collect.trace.columns import Columns
from gputui.diagnose.hang.classify import SPIN_UTIL_MIN, GpuState, classify_all
from gputui.diagnose.job_groups import IN_USE_MEM_MB, IN_USE_MEM_UTIL, IN_USE_UTIL, in_use
from gputui.diagnose.slow.straggler import BUSY_UTIL_MIN, WAIT_UTIL_MIN, is_waiting, peers_ref

__all__ = ["CodeReader", "code_of", "quiet_key"]

_new, _set = object.__new__, object.__setattr__
# What the code's parts read of a GPU (the rest of GpuSample stays at its default).
_READ = ("util", "mem_util", "power_w", "power_limit_w", "mem_used_mb")
SPINNING = GpuState.SPINNING
# Below this util a GPU neither spins (classify: SPIN_UTIL_MIN, node rule included) nor waits
# in a collective (is_waiting: WAIT_UTIL_MIN, its peers' readings not read)
QUIET_UTIL_MAX = min(SPIN_UTIL_MIN, WAIT_UTIL_MIN)


def code_of(
    gpus: Sequence[GpuSample], peers: Sequence[Sequence[int]]
) -> tuple[tuple[Any, ...], ...]:
    """The code of one sample's GPUs (in index order, as a Snapshot holds them).

    Args:
        gpus: the sample's GPUs, in index order.
        peers: the GPUs of each job group of two or more GPUs present at this sample, in the
            detector's group order (largest first): what a GPU's wait is measured against.

    Returns:
        One tuple per GPU: (index, pids, spinning, wait, in use).
    """
    if all(g.util is None or g.util < QUIET_UTIL_MAX for g in gpus):
        # No kernel resident the whole sample anywhere (most samples of a node's day):
        # nothing spins, and a GPU's wait is busy or none whatever its peers read.
        return tuple([(g.index, g.pids, False, is_waiting(g), in_use(g)) for g in gpus])
    states = classify_all(gpus)
    refs = peers_ref(gpus, peers) if peers else {}
    return tuple(
        [
            (g.index, g.pids, st is SPINNING, is_waiting(g, refs.get(g.index)), in_use(g))
            for g, st in zip(gpus, states, strict=True)
        ]
    )


def quiet_key(code: tuple[tuple[Any, ...], ...]) -> tuple[tuple[Any, ...], ...] | None:
    """What must stay the same for a sample to be quiet: each GPU's index, processes and
    whether it is in use (the groups the detector forms from them); None when a GPU spins
    or waits (a run starts, or a wait enters the windows: never quiet).

    Its class (beyond spinning), power, pstate and events are left out on purpose: in a
    sample that does not alarm they reach only the verdict's words and GPU states, which
    change no printed line's key and are not kept for the next sample; the sample that is
    printed (a changed key, the last one) is judged in full."""
    out = []
    for index, pids, spins, wait, used in code:
        if spins or wait:
            return None
        out.append((index, pids, used))
    return tuple(out)


class CodeReader:
    """The code of sample k of Columns, read from the columns (no Snapshot).

    A GPU line below QUIET_UTIL_MAX (or without util) neither spins nor waits, so its part
    of the code needs no peer: for such lines the parts are worked out for the whole file
    at once (`_lines`, a handful of `map`s over the columns, in C), and a sample of such
    lines alone (most samples of a node's day) is a lookup. A sample with a line at or above
    it is read as GpuSamples and coded by code_of."""

    def __init__(self, cols: Columns, ends: Sequence[int]) -> None:
        """`ends[k]`: one past sample k's last line (ColumnSnaps keeps them)."""
        self.cols = cols
        self.ends = ends
        self._floats = [(a, cols.floats[a]) for a in _READ]
        # per line: (index, pids, in use) below QUIET_UTIL_MAX, else None; and its wait code
        self._parts: list[tuple[int, tuple[int, ...], bool] | None] | None = None
        self._waits: list[bool | None] = []

    def gpus(self, k: int) -> list[GpuSample]:
        """Sample k's GPUs in index order, holding the readings the code reads."""
        c = self.cols
        index = c.gpu
        order = sorted(range(c.starts[k], self.ends[k]), key=index.__getitem__)
        pids = c.pids
        out = []
        for i in order:
            d: dict[str, Any] = {"index": index[i], "pids": pids[i]}
            for a, col in self._floats:
                v = col[i]
                d[a] = None if v != v else v
            g: Any = _new(GpuSample)
            _set(g, "__dict__", d)
            out.append(g)
        return out

    def code(self, k: int, peers: Sequence[Sequence[int]]) -> tuple[tuple[Any, ...], ...]:
        """Sample k's code (code_of's), looked up when every line of it is quiet."""
        parts, waits = self.lines()
        lo, hi = self.cols.starts[k], self.ends[k]
        got = parts[lo:hi]
        if None in got:
            return code_of(self.gpus(k), peers)
        return tuple(
            sorted((p[0], p[1], False, w, p[2]) for p, w in zip(got, waits[lo:hi], strict=True))  # type: ignore[index]
        )

    def lines(self) -> tuple[list[tuple[int, tuple[int, ...], bool] | None], list[bool | None]]:
        """Per line: (index, pids, in use) when its util is below QUIET_UTIL_MAX (else
        None), and its wait code there (is_waiting: None without a kernel, a process or
        the readings to tell; else busy). Worked out once, for the whole file."""
        if self._parts is None:
            self._parts, self._waits = _quiet_lines(self.cols)
        return self._parts, self._waits


def _quiet_lines(
    cols: Columns,
) -> tuple[list[tuple[int, tuple[int, ...], bool] | None], list[bool | None]]:
    """CodeReader.lines, in C over the columns (NaN, "not in the file", compares false as
    None fails the same tests in the functions it stands for: in_use, is_waiting)."""
    f = cols.floats
    util, mem, power, limit, used = (
        f["util"], f["mem_util"], f["power_w"], f["power_limit_w"], f["mem_used_mb"]
    )  # fmt: skip
    high = map(ge, util, repeat(QUIET_UTIL_MAX))
    in_use = map(
        or_,
        map(or_, map(ge, util, repeat(IN_USE_UTIL)), map(ge, mem, repeat(IN_USE_MEM_UTIL))),
        map(ge, used, repeat(IN_USE_MEM_MB)),
    )
    parts = [
        None if h else (i, p, u)
        for h, i, p, u in zip(high, cols.gpu, cols.pids, in_use, strict=True)
    ]
    # power_frac is known: a power reading and a non-zero limit
    frac = map(
        and_, map(eq, power, power), map(and_, map(eq, limit, limit), map(ne, limit, repeat(0.0)))
    )
    readable = map(or_, map(eq, mem, mem), frac)
    busy = map(and_, map(ge, util, repeat(BUSY_UTIL_MIN)), map(bool, cols.pids))
    waits = [False if b else None for b in map(and_, busy, readable)]
    return parts, waits
