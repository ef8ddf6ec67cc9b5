"""One way to run the Watcher over a series of snapshots: the faces' one loop.

Why: "make a Watcher, feed it each snapshot, keep the verdicts, close it" was written in
every face (check, snapshot, bundle, record, the verdict moment, the dashboard), each with
its own construction and its own way (or none) of closing. A `WatchRun` is made from one
`WatchSettings`, owns its Watcher (made here, and only here for a face) and closes it,
whatever ends the run.

Snapshots come from an iterable (a recording read whole, a window of one, a paced live
generator) or from a Source read as fast as it gives (a replay). A live Source is paced by
its caller's own loop, never here: pacing is gputui.collect's.

A replay of columns takes the quiet step over the samples that provably change nothing
printed (`quiet_steps`, below).

A face that gathers nothing and wants the detector's verdict alone (the exporter, which
attaches to no process) uses `gputui.watch.judge.Judge`, the same detector's home.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

from gputui.diagnose.verdict import OK
from gputui.watch.settings import WatchSettings

if TYPE_CHECKING:
    from gputui.collect.model import Snapshot
    from gputui.collect.source import Source
    from gputui.collect.trace.columns import ColumnSnaps
    from gputui.diagnose.verdict import Verdict
    from gputui.watch.watcher import Watcher

__all__ = [
    "QUIET_ENV",
    "QuietSteps",
    "WatchRun",
    "last_verdict",
    "quiet_steps",
    "replay_settings",
    "samples",
    "verdicts_over",
]

QUIET_ENV = "GPUTUI_REPLAY_QUIET"  # "0": every sample of a replay judged in full


class WatchRun:
    """A Watcher made from `settings`, fed snapshot by snapshot, closed at the end.

    Use it as a context manager, or call `close()`; `step` is for a caller that owns its
    loop (a paced live loop, the dashboard's sampler thread), `over` for one that does not.
    """

    def __init__(self, settings: WatchSettings | None = None) -> None:
        from gputui.watch.watcher import Watcher

        self.settings = settings if settings is not None else WatchSettings()
        self.watcher: Watcher = Watcher(self.settings)
        self.last: Verdict | None = None  # the verdict at the latest snapshot

    def step(self, snap: Snapshot) -> Verdict:
        """The verdict at `snap` (never blocks: evidence is gathered off this thread)."""
        self.last = v = self.watcher.update(snap)
        return v

    def over(self, snaps: Iterable[Snapshot] | Source) -> Iterator[tuple[Snapshot, Verdict]]:
        """Each snapshot with its verdict, in order.

        Args:
            snaps: the snapshots, or a Source read until it has no more (`samples`).

        Returns:
            An iterator of (snapshot, verdict); the Watcher stays open (close the run).
        """
        for snap in samples(snaps):
            yield snap, self.step(snap)

    def close(self) -> None:
        """Cancel the Watcher's gatherers and let their threads end (bounded)."""
        self.watcher.close()

    def __enter__(self) -> WatchRun:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def samples(snaps: Iterable[Snapshot] | Source) -> Iterable[Snapshot]:
    """The snapshots of an iterable as they are, or of a Source until its `sample()` says
    there are no more (None): a replay read as fast as it gives, unpaced."""
    sample = getattr(snaps, "sample", None)
    if sample is None:
        return snaps  # type: ignore[return-value]
    return iter(sample, None)


def replay_settings(settings: WatchSettings | None = None) -> WatchSettings:
    """`settings` (default: the command line's defaults) for snapshots that are a
    recording's: nothing is gathered, the evidence is the recorded one."""
    return replace(settings if settings is not None else WatchSettings(), live=False)


def verdicts_over(
    snaps: Iterable[Snapshot] | Source, settings: WatchSettings | None = None
) -> list[Verdict]:
    """The verdict at each snapshot, as a replay's Watcher gives it (recorded stacks
    included).

    Args:
        snaps: the snapshots (or a replay Source).
        settings: the thresholds; judged as a replay whatever its `live` says.

    Returns:
        One verdict per snapshot, in order.
    """
    with WatchRun(replay_settings(settings)) as run:
        return [v for _s, v in run.over(snaps)]


def last_verdict(
    snaps: Iterable[Snapshot] | Source, settings: WatchSettings | None = None
) -> Verdict | None:
    """The verdict at the last snapshot, judged as a replay (None when there is none).

    Args:
        snaps: the snapshots (or a replay Source).
        settings: the thresholds; judged as a replay whatever its `live` says.

    Returns:
        The last verdict, with the evidence the snapshots carry.
    """
    with WatchRun(replay_settings(settings)) as run:
        for _s, _v in run.over(snaps):
            pass
        return run.last


# ---------------------------------------------------------------- the quiet step


def quiet_steps(source: Any, watcher: Watcher) -> QuietSteps | None:
    """The quiet step for a replay of columns judged by `watcher`; None (every sample in
    full) for any other source, a live watcher, or GPUTUI_REPLAY_QUIET=0. The source itself
    must be the ReplaySource: one seen through another (`--gpus`: FilteredSource) shows the
    Watcher other samples than its columns hold."""
    if os.environ.get(QUIET_ENV, "1").strip() == "0":
        return None
    from gputui.collect.source import ReplaySource
    from gputui.collect.trace.columns import ColumnSnaps

    if type(source) is not ReplaySource or not isinstance(source.snaps, ColumnSnaps):
        return None
    if watcher.settings.live:  # (a replayed Watcher has no gatherers)
        return None
    return QuietSteps(source, watcher)


class QuietSteps:
    """The quiet step: a replay's samples that provably change nothing a face prints,
    skipped, after each full step of its Watcher over a ColumnSnaps replay.

    Why: `check --replay` of a day of a node ran the Watcher over every sample, ~75 us each
    (building the Snapshot, the detector, the watcher's parts, the face's own bookkeeping), and
    no micro-optimisation reaches the speed of reading from there. In most of a node's samples
    (95 % of a churning 7-hour history) nothing moves that the detector could act on: the same
    processes on the same GPUs, the same GPUs in use, none spinning and none waiting. Such a
    sample gives the verdict of the sample before (its time, words and wait shares aside, none
    of which a printed line's key holds), and `check` prints a line only when that key changes.
    So after each full step, while the next sample's quiet key (gputui.diagnose.quiet_code)
    equals the last one's and the Watcher is settled, the sample takes a quiet step: only the
    bookkeeping the next full step reads (each group member's last_seen, each GPU's wait-window
    note, the jobs' last-listed time, the sample count). The last sample of a replay always takes
    a full step, so the final verdict, its time and the state after it are the full path's.

    Settled, read part by part after the full step:

    - its verdict is ok: no alarm, straggler, waiting GPU, busy rank, finding or evidence;
    - the detector has no spin run and no stalled job; the sample spins nowhere;
    - the wait shares hold no wait in any window, no held straggler, no hysteresis;
    - every group member was seen at that sample (none vanished, none inferred), no departed pid;
    - the Watcher gathers nothing (a replay), has nothing pending, no alarm state, no rank I/O
      tracker; its deaths, vanished jobs, busy watch and rendezvous watch are settled, and it
      holds no evidence record;
    - the source is columns: its samples carry no records and no N/A reasons, so the health
      tracker and the node report read nothing new from a sample with the same processes.

    `GPUTUI_REPLAY_QUIET=0` turns the quiet step off (every sample judged in full): the output
    is byte-identical either way (tests/test_quiet_step.py runs both over every recording read as
    columns), the switch is for debugging.
    """

    def __init__(self, source: Any, watcher: Watcher) -> None:
        """`source`: a ReplaySource of a ColumnSnaps; its position is moved past the
        samples that take the quiet step."""
        from gputui.diagnose.quiet_code import CodeReader

        self.source = source
        self.snaps: ColumnSnaps = source.snaps
        snaps = self.snaps
        self.watcher = watcher
        self.reader = CodeReader(snaps.cols, snaps.ends)
        self.quiet = 0  # samples that took the quiet step (for the bench and the tests)

    def skip(self, verdict: Verdict) -> int:
        """Quiet steps over the source's next samples (the one before has just had its full
        step, with `verdict`) while each provably changes nothing; never over the last one.

        Returns:
            How many samples took the quiet step (the source has moved past them).
        """
        pos = self.source.pos
        last = len(self.snaps) - 1
        if pos < 1 or pos >= last:
            return 0
        det = self.watcher.detector
        t_prev = self.snaps.times[pos - 1]
        if not self._settled(verdict, t_prev):
            return 0
        from gputui.diagnose.quiet_code import code_of, quiet_key

        groups = sorted(det.memory.groups.values(), key=lambda g: -len(g.members))
        peers = [tuple(sorted(g.members)) for g in groups if len(g.members) >= 2]
        reader = self.reader
        prev = quiet_key(reader.code(pos - 1, peers))
        if prev is None:
            return 0
        hists, times = det.waits.gpus, self.snaps.times
        parts, waits = reader.lines()
        starts, ends = self.snaps.cols.starts, self.snaps.ends
        noted: dict[int, list[tuple[float, bool | None]]] = {}  # each GPU's window notes
        k = pos
        while k < last:
            lo, hi = starts[k], ends[k]
            got = parts[lo:hi]
            t = times[k]
            if None in got:  # a GPU at util 90 or more: coded in full
                code = code_of(reader.gpus(k), peers)
                if quiet_key(code) != prev:
                    break
                notes = [(part[0], part[3]) for part in code]
            else:
                if tuple(sorted(got)) != prev:  # type: ignore[type-var]
                    break
                notes = [(part[0], waits[i]) for i, part in enumerate(got, lo)]  # type: ignore[index]
            for i, wait in notes:  # each GPU's window note, as WaitShares.observe makes it
                noted.setdefault(i, []).append((t, wait))
            k += 1
        for i, pairs in noted.items():  # noted at once: nothing reads a share in between
            hists[i].note_many(pairs)
        if k > pos:  # the members and jobs seen again: only the last time is kept
            det.memory.seen_at(times[k - 1])
            self.watcher.vanish.seen_at(times[k - 1])
        self.quiet += k - pos
        self.source.pos = k
        return k - pos

    def _settled(self, v: Verdict, t: float) -> bool:
        """Whether a sample with the last one's code would change nothing (class doc)."""
        if v.state != OK or v.alarm or v.stragglers or v.waiting_gpus or v.busy:
            return False
        if v.findings or v.evidence or v.stacks:
            return False
        w = self.watcher
        det = w.detector
        if det.runs or det.job_verdicts or not det.waits.settled():
            return False
        if not det.memory.settled(t):
            return False
        if w.pending() or w.ras is not None or w.rankio is not None or w.alarms:
            return False
        if not (w.deaths.settled() and w.vanish.settled() and w.busy.settled()):
            return False
        rdzv = w.rendezvous
        if rdzv is not None and not rdzv.settled():
            return False
        return not w.records.held()
