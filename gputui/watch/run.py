"""One way to run the Watcher over a series of snapshots: the faces' one loop.

Why: "make a Watcher, feed it each snapshot, keep the verdicts, close it" was written in
every face (check, snapshot, bundle, record, the verdict moment, the dashboard), each with
its own construction and its own way (or none) of closing. A `WatchRun` is made from one
`WatchSettings`, owns its Watcher (made here, and only here for a face) and closes it,
whatever ends the run.

Snapshots come from an iterable (a recording read whole, a window of one, a paced live
generator) or from a Source read as fast as it gives (a replay). A live Source is paced by
its caller's own loop, never here: pacing is gputui.collect's.

A face that gathers nothing and wants the detector's verdict alone (the exporter, which
attaches to no process) uses `gputui.watch.judge.Judge`, the same detector's home.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING

from gputui.watch.settings import WatchSettings

if TYPE_CHECKING:
    from gputui.collect.model import Snapshot
    from gputui.collect.source import Source
    from gputui.diagnose.verdict import Verdict
    from gputui.watch.watcher import Watcher

__all__ = ["WatchRun", "last_verdict", "replay_settings", "samples", "verdicts_over"]


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
