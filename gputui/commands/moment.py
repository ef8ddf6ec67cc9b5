"""The moment of a recording's verdict, and the verdict at any sample of it.

`snapshot --demo` and `bundle --demo` took the recording's last sample: the end of the demo,
idle and "ok", when the point of the demo is the hang. They now take the moment the
detector's verdict names the hang with its evidence (the suspect's stack), which is what a
person looking at the dashboard would have seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputui.collect.model import Snapshot
    from gputui.diagnose.verdict import Verdict
    from gputui.watch.settings import WatchSettings

__all__ = ["verdict_moment", "verdicts"]


def verdicts(snaps: Sequence[Snapshot], settings: WatchSettings | None = None) -> list[Verdict]:
    """The verdict at each sample, as a replay's Watcher gives it (recorded stacks included)."""
    from gputui.watch.run import verdicts_over

    return verdicts_over(snaps, settings)


def verdict_moment(snaps: Sequence[Snapshot], settings: WatchSettings | None = None) -> int | None:
    """Index of the first sample whose verdict is an alarm with its evidence (the suspect's
    stack, else the findings), else of the first alarm; None when nothing alarmed.

    `settings`: the thresholds (default: the command line's); judged as a replay."""
    vs = verdicts(snaps, settings)
    for want in (
        lambda v: v.alarm and v.culprit_frame,
        lambda v: v.alarm and v.findings,
        lambda v: v.alarm,
    ):
        i = next((i for i, v in enumerate(vs) if want(v)), None)
        if i is not None:
            return i
    return None
