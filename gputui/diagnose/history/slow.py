"""Stragglers over a window: gputui.diagnose.slow's rule (is_waiting per sample, split of the
wait shares) asked of a job's history, across nodes.

Each GPU's wait share is the fraction of its busy steps in the collective-wait pattern (or
clearly lighter than the job's busiest GPU at that step); the straggler waits in few while
its peers wait in most. Counted over the steps before the job's first stall (a stalled
job's culprit is a suspect, not a straggler), in the detector's one pass over the window,
and again over each GPU's last RECENT busy steps, which must agree, as the live rule's
recent part must.
"""

from __future__ import annotations

from collections import deque

from gputui.collect.model import GpuSample
from gputui.diagnose.slow.straggler import BUSY_UTIL_MIN, MIN_RECENT, MIN_SAMPLES, is_waiting, split

RECENT = 20  # busy steps: 5 minutes at 15 s


class Waits:
    """One job's wait counts per GPU, fed one step at a time."""

    def __init__(self) -> None:
        self.busy: dict[int, int] = {}
        self.waits: dict[int, int] = {}
        self.recent: dict[int, deque[bool]] = {}

    def observe(self, samples: dict[int, GpuSample]) -> None:
        on = [s for s in samples.values() if s.util is not None and s.util >= BUSY_UTIL_MIN]
        if len(on) < 2:
            return
        fracs = [f for s in on if (f := s.power_frac) is not None]
        mems = [s.mem_util for s in on if s.mem_util is not None]
        ref = (max(fracs) if fracs else None, max(mems) if mems else None)
        for i, s in samples.items():
            w = is_waiting(s, ref)
            if w is None:
                continue
            self.busy[i] = self.busy.get(i, 0) + 1
            self.waits[i] = self.waits.get(i, 0) + w
            r = self.recent.get(i)
            if r is None:
                r = self.recent[i] = deque(maxlen=RECENT)
            r.append(w)

    def judge(self, members: list[int], names: dict[int, str]) -> tuple[list[str], str | None]:
        """(stragglers by name, the sentence), or ([], None) when the rule names none."""
        if len(members) < 2:
            return [], None
        busy, waits, recent = self.busy, self.waits, self.recent
        if any(busy.get(i, 0) < MIN_SAMPLES or len(recent[i]) < MIN_RECENT for i in members):
            return [], None
        shares = {names[i]: waits[i] / busy[i] for i in members}
        last = {names[i]: sum(recent[i]) / len(recent[i]) for i in members}
        low, high, _alike = split(shares, last)
        if not low:
            return [], None
        lo = max(shares[k] for k in low)
        hi = min(shares[k] for k in high)
        return list(low), (
            f"straggler {', '.join(low[:4])}{' ...' if len(low) > 4 else ''} waits in "
            f"{lo:.0%} of its busy samples or fewer while {len(high)} peer GPU(s) wait in "
            f"{hi:.0%} or more: the others wait for it"
        )
