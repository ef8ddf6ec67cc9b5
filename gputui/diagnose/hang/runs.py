"""How long each GPU has been spinning: a pure fold over its per-sample states.

A hang must be told from a healthy rank that waits in a collective for a moment. The rule:
a run of spinning starts at the first spinning sample and lasts while the GPU keeps
spinning. It ends at once on any sign of progress (memory traffic or compute power: the
collective completed) or when the process leaves the GPU. Samples with no readings are
skipped over for up to `dip_max` seconds. Once the run has already lasted `stall_after` (the
alarm is up), a dip to idle of up to `dip_max` seconds is bridged too: attaching a debugger
to the waiting rank stops it for a moment (recorded: util 0 for 0.8 s while cuda-gdb held
rank 0), and that must not clear the alarm and restart the clock. Before the alarm, a dip to
idle does end the run, so a rank that alternates short waits with CPU work never chains up
into a false alarm.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.collect.pacing import lasted
from gputui.diagnose.hang.classify import GpuState

# Longest dip (no readings, or idle once the alarm is up) that does not end a run.
DIP_MAX_S = 1.5


@dataclass(frozen=True)
class SpinRun:
    """A GPU's current run of spinning: when it began, and the last sample that spun."""

    since: float
    last_spin: float

    def length(self, now: float) -> float:
        return max(0.0, now - self.since)


def advance_run(
    run: SpinRun | None,
    t: float,
    state: GpuState,
    *,
    stall_after: float,
    dip_max: float = DIP_MAX_S,
    max_gap: float | None = None,
) -> SpinRun | None:
    """The run after one more sample at time `t` in `state`. Pure.

    `max_gap`: when two spinning samples are further apart than this (sampling paused, a
    wedged NVML call), continuity cannot be claimed and the run starts again.
    """
    gap = None if run is None else t - run.last_spin
    if state is GpuState.SPINNING:
        if run is None or gap is None or (max_gap is not None and gap > max_gap):
            return SpinRun(since=t, last_spin=t)
        return SpinRun(since=run.since, last_spin=t)
    if run is None or gap is None or gap > dip_max:
        return None
    if state is GpuState.UNKNOWN:
        return run
    if state is GpuState.IDLE and lasted(run.last_spin - run.since, stall_after):
        return run
    return None
