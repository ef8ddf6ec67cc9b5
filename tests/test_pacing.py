"""The one pacing loop (gputui.collect.pacing.Ticker): ticks on absolute deadlines.

The ticker waits on its stop Event; here that Event is a stand-in whose `wait(seconds)`
moves a fake monotonic clock on by exactly that much, so every deadline can be read off the
clock without sleeping. Work between ticks is `clock.now += cost`.
"""

from __future__ import annotations

import threading
import time

import pytest

from gputui.collect.pacing import JITTER_S, Ticker, lasted
from gputui.collect.sampler import Sampler


class FakeClock:
    """A monotonic clock that moves only when told (or when the ticker waits on it)."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class ClockEvent(threading.Event):
    """An Event whose timed wait passes on the fake clock, at once, and records the wait."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None, "the ticker never waits without a deadline"
        self.waits.append(timeout)
        self.clock.now += timeout
        return self.is_set()


def ticks_of(ticker: Ticker, clock: FakeClock, costs: list[float]) -> list[float]:
    """Run the loop: one tick, then `cost` seconds of work, for each cost; the tick times."""
    seen = []
    for cost in costs:
        assert ticker.wait()
        seen.append(clock.now)
        clock.now += cost
    return seen


def fake_ticker(interval: float | object, **kw: object) -> tuple[Ticker, FakeClock, ClockEvent]:
    clock = FakeClock()
    event = ClockEvent(clock)
    return Ticker(interval, stop=event, clock=clock, **kw), clock, event  # type: ignore[arg-type]


def test_the_first_tick_is_at_once_and_the_next_ones_on_the_interval_grid() -> None:
    ticker, clock, _ = fake_ticker(0.5)
    assert ticks_of(ticker, clock, [0.02] * 5) == pytest.approx([100.0, 100.5, 101.0, 101.5, 102.0])


def test_a_samples_own_time_does_not_move_the_next_ticks() -> None:
    # Each sample takes 0.3 s of a 0.5 s interval: waiting the interval after it would
    # tick every 0.8 s; the deadlines stay at start + k * 0.5.
    ticker, clock, event = fake_ticker(0.5)
    assert ticks_of(ticker, clock, [0.3] * 4) == pytest.approx([100.0, 100.5, 101.0, 101.5])
    assert event.waits == pytest.approx([0.2, 0.2, 0.2])  # the rest of each interval


def test_a_slow_tick_does_not_shift_the_ticks_after_it() -> None:
    # Tick 1's sample takes 0.45 s of the 0.5 s: tick 2 is still due at start + 1.0.
    ticker, clock, _ = fake_ticker(0.5)
    assert ticks_of(ticker, clock, [0.01, 0.45, 0.01, 0.01]) == pytest.approx(
        [100.0, 100.5, 101.0, 101.5]
    )


def test_a_wake_up_that_comes_late_is_not_added_to_the_next_period() -> None:
    # The OS woke the loop 30 ms late for tick 1: tick 2 is due at start + 1.0 all the same.
    clock = FakeClock()

    class LateEvent(ClockEvent):
        def wait(self, timeout: float | None = None) -> bool:
            super().wait(timeout)
            self.clock.now += 0.03
            return self.is_set()

    ticker = Ticker(0.5, stop=LateEvent(clock), clock=clock)
    seen = ticks_of(ticker, clock, [0.01, 0.01, 0.01])
    assert seen == pytest.approx([100.0, 100.53, 101.03])


def test_a_tick_that_overruns_skips_the_missed_ticks_and_never_bursts() -> None:
    # Tick 1's sample takes 1.2 s (a GPU slow to answer): ticks 2 and 3 (due at 101.0 and
    # 101.5) have passed. They are skipped, not run back to back: the next is tick 4, on the grid.
    ticker, clock, _ = fake_ticker(0.5)
    seen = ticks_of(ticker, clock, [0.01, 1.2, 0.01, 0.01])
    assert seen == pytest.approx([100.0, 100.5, 102.0, 102.5])
    assert ticker.skipped == 2


def test_at_least_backs_off_on_the_grid() -> None:
    # After a failed sample the sampler asks for at least 1 s: the next tick is the first
    # one on the grid that is 1 s or more away.
    ticker, clock, _ = fake_ticker(0.4)
    assert ticker.wait()
    clock.now += 0.05
    assert ticker.wait(at_least=1.0)
    assert clock.now == pytest.approx(101.2)  # ticks at 100.4 and 100.8 skipped


def test_the_interval_is_read_at_each_tick_so_a_replay_keeps_its_recorded_gaps() -> None:
    # A replay's next_delay() is the gap to its next sample: 1 s, then 2 s, then 0.5 s.
    gaps = iter([1.0, 2.0, 0.5])
    ticker, clock, _ = fake_ticker(lambda: next(gaps))
    assert ticks_of(ticker, clock, [0.1] * 4) == pytest.approx([100.0, 101.0, 103.0, 103.5])


def test_no_interval_ticks_at_once() -> None:
    # A replay played as fast as it reads (`check --replay`) has no interval: no wait at all.
    ticker, clock, event = fake_ticker(0.0)
    assert ticks_of(ticker, clock, [0.01] * 3) == pytest.approx([100.0, 100.01, 100.02])
    assert event.waits == []


def test_tick_zero_can_be_given_ahead() -> None:
    # The dashboard's sampler: the first sample was taken before the thread started, so the
    # loop's first tick is one interval after it.
    clock = FakeClock()
    ticker = Ticker(1.0, stop=ClockEvent(clock), clock=clock, start=clock.now + 1.0)
    assert ticks_of(ticker, clock, [0.1, 0.1]) == pytest.approx([101.0, 102.0])


def test_due_says_when_the_next_tick_is_without_waiting() -> None:
    # bundle asks whether one more tick still fits in --seconds.
    ticker, clock, event = fake_ticker(0.5)
    assert ticker.wait()
    clock.now += 0.6
    assert ticker.due() == pytest.approx(101.0)  # 100.5 was overrun
    assert event.waits == []


def test_a_stopped_ticker_does_not_tick() -> None:
    ticker, _, event = fake_ticker(0.5)
    event.set()
    assert ticker.wait() is False
    assert event.waits == []


def test_stop_ends_a_wait_in_progress_at_once() -> None:
    # A real Event and a real clock: an hour-long interval, and stop() from another thread
    # ends the wait (the thread is joined with a generous bound, no sleep).
    ticker = Ticker(3600.0)
    assert ticker.wait()  # tick 0
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(ticker.wait()), daemon=True)
    waiter.start()
    ticker.stop()
    waiter.join(timeout=30)
    assert not waiter.is_alive(), "the wait did not end on stop()"
    assert result == [False]
    assert ticker.stopped


class ZeroGapSource:
    """A replay at a gap of 0 s (two samples recorded at the same time); notes when the
    sampler asks for its interval, which the ticker does once for every tick."""

    kind = "replay"
    description = "zero-gap replay"

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.three = threading.Event()
        self.samples = 0

    def sample(self) -> None:
        self.samples += 1
        return None

    def next_delay(self) -> float:
        self.asked.append(time.monotonic())
        if len(self.asked) >= 3:
            self.three.set()
        return 0.0

    def close(self) -> None:
        pass


def test_a_paused_sampler_looks_again_at_most_five_times_a_second_even_at_a_zero_gap() -> None:
    # Paused on a replay whose next gap is 0 s, each tick would be due at once: the sampler
    # waits at least 0.2 s between looks instead of spinning a core.
    source = ZeroGapSource()
    sampler = Sampler(source, on_snapshot=lambda s: None)
    sampler.pause(True)
    sampler.start()
    try:
        assert source.three.wait(timeout=30), "the paused sampler stopped looking"
    finally:
        sampler.stop()
    gaps = [b - a for a, b in zip(source.asked, source.asked[1:], strict=False)]
    assert min(gaps[:2]) >= 0.15, gaps
    assert source.samples == 0  # paused: nothing sampled


def test_a_span_of_whole_ticks_makes_its_period_give_or_take_the_wake_up_jitter() -> None:
    # "Every 2 s" at a 1 s interval: two ticks on the grid are 2 s apart, a few ms either way.
    assert lasted(1.997, 2.0) and lasted(2.003, 2.0)
    assert not lasted(1.0, 2.0)  # one tick is not two
    assert lasted(2.0 - JITTER_S, 2.0) and not lasted(2.0 - JITTER_S - 0.001, 2.0)
