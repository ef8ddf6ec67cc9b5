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


def verdicts(
    snaps: Sequence[Snapshot], stall_after: float = 10.0, hang_after: float = 60.0
) -> list[Verdict]:
    """The verdict at each sample, as a replay's Watcher gives it (recorded stacks included)."""
    from gputui.watch.watcher import Watcher

    w = Watcher(stall_after, hang_after, live=False)
    try:
        return [w.update(s) for s in snaps]
    finally:
        w.close()


def verdict_moment(
    snaps: Sequence[Snapshot], stall_after: float = 10.0, hang_after: float = 60.0
) -> int | None:
    """Index of the first sample whose verdict is an alarm with its evidence (the suspect's
    stack, else the findings), else of the first alarm; None when nothing alarmed."""
    vs = verdicts(snaps, stall_after, hang_after)
    for want in (
        lambda v: v.alarm and v.culprit_frame,
        lambda v: v.alarm and v.findings,
        lambda v: v.alarm,
    ):
        i = next((i for i, v in enumerate(vs) if want(v)), None)
        if i is not None:
            return i
    return None
