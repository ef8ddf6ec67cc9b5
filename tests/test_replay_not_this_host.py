"""A replay judges what the recording says, never this host: and its quiet step notes a
run of samples at once, with the same wait windows as one note at a time."""

from __future__ import annotations

import os
import random

import psutil

from gputui.collect.model import Snapshot
from gputui.diagnose.slow.busy_windows import GpuHistory
from gputui.watch.vanished import Member, VanishWatch


def test_a_recorded_rank_whose_pid_runs_here_is_still_gone_in_a_replay():
    """A recording's pids are another host's (or another day's): this test's own pid, not
    listed in the sample, is a gone rank to a replay, and a live rank to a live watch."""
    me = psutil.Process(os.getpid())
    members = (Member(os.getpid(), 0, 0, None, None, None),)
    empty = Snapshot(t=1.0, gpus=(), processes=())
    assert VanishWatch(None)._live_ranks(members, empty) is False
    live = VanishWatch(lambda *_: None)
    assert live._live_ranks(members, empty) is True
    other = (Member(os.getpid(), 0, 0, me.create_time() - 100.0, None, None),)
    assert live._live_ranks(other, empty) is False  # the same pid, another process


def _history() -> GpuHistory:
    return GpuHistory((7,), 0.0, window_s=30.0, recent_s=5.0)


def _state(h: GpuHistory) -> tuple:
    return (list(h.window.items), h.window.waits, list(h.recent.items), h.recent.waits)


def test_notes_taken_at_once_leave_the_windows_as_notes_taken_one_by_one():
    rng = random.Random(44)
    for _ in range(200):
        one, many = _history(), _history()
        before = sorted(rng.uniform(0, 100) for _ in range(rng.randint(0, 40)))
        for t0 in before:  # what the windows held before the run
            one.note(t0, rng.random() < 0.5)
            many.note(t0, one.window.items[-1][1])
        t, notes = 100.0, []
        for _ in range(rng.randint(0, 120)):
            t += rng.choice((0.25, 0.5, 1.0, 7.0))
            notes.append((t, rng.choice((None, False, True))))
        for t_, w in notes:
            one.note(t_, w)
        many.note_many(notes)
        assert _state(one) == _state(many)
        assert one.shares() == many.shares()
