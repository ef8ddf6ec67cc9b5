"""Replay sources of hangs for UI tests: windows of the real recording, and an 8-GPU hang
built from the measured H200 readings (tests/synth.py)."""

from __future__ import annotations

from synth import timeline

from gputui.collect.source import ReplaySource


def hang_window(demo_snaps, phase="stall_in_loop", seconds=20.0) -> ReplaySource:
    """The demo from the start of `phase` for `seconds`, replayed as fast as possible."""
    start = next(i for i, s in enumerate(demo_snaps) if s.phase == phase)
    t0 = demo_snaps[start].t
    snaps = [s for s in demo_snaps[start:] if s.t - t0 <= seconds]
    return ReplaySource(snaps, name="test", realtime=False)


def eight_gpu_hang(seconds: float = 16.0, stuck: int = 5) -> ReplaySource:
    """Eight ranks of one job; rank `stuck` stops entering the collective (idle), the other
    seven spin: the stall is raised after 10 s."""
    healthy = ["compute"] * 8
    hang = ["spin"] * 8
    hang[stuck] = "idle"
    snaps = list(timeline((3.0, healthy), (seconds, hang), local=True))
    return ReplaySource(snaps, name="8 x H200 (synthetic)", realtime=False)
