"""The guided demo: it holds at each finding until the user goes on, and ends on a summary.

Driven as a person drives it (Textual's Pilot presses the keys) on the bundled recording,
replayed as fast as it can be: the hold must stop the replay at the moment of the finding, not
a sample later, whatever the speed.
"""

from __future__ import annotations

import asyncio

from screen import on_screen, screen_text, until

from gputui.collect.source import ReplaySource, demo_offset
from gputui.ui.app import GputuiApp
from gputui.ui.details_screen import TextScreen
from gputui.ui.story import DemoStory


def fast_demo() -> ReplaySource:
    return ReplaySource.demo(realtime=False)


async def test_the_demo_holds_at_the_stall_with_its_culprit_until_space():
    app = GputuiApp(fast_demo(), story=DemoStory())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.story.holding == 0)
        await pilot.pause()
        held = app.snapshot.t
        assert app.sampler.paused
        assert app.verdict.alarm and app.verdict.culprit_frame == "<module> (worker2.py:37)"
        assert on_screen(app, "demo 1/2: a rank stopped entering all_reduce")
        assert on_screen(app, "space: go on to the next hang")
        assert on_screen(app, "worker2.py:37")
        await asyncio.sleep(0.5)  # as fast as the replay goes, nothing moves while it holds
        await pilot.pause()
        assert app.snapshot.t == held and app.story.holding == 0


async def test_while_it_holds_a_d_and_p_open_their_panes_and_the_hold_stays():
    app = GputuiApp(fast_demo(), story=DemoStory())
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, lambda: app.story.holding == 0)
        await pilot.press("a")
        assert isinstance(app.screen, TextScreen)
        assert on_screen(app, "ODD  rank 1 (pid 815) · GPU 1 · suspect")
        assert on_screen(app, "rank 0 (pid 814) · GPU 0 · waiting")
        await pilot.press("escape", "d")
        assert on_screen(app, "rank 1 (pid 815) is in <module> (worker2.py:37)")
        await pilot.press("escape", "p")  # the suspect is selected by itself at the alarm
        assert on_screen(app, "recorded py-spy dump of pid 815")
        await pilot.press("escape")
        assert not isinstance(app.screen, TextScreen)
        assert app.story.holding == 0 and app.sampler.paused


async def test_space_goes_on_to_the_dead_rank_and_then_to_the_summary():
    app = GputuiApp(fast_demo(), story=DemoStory())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.story.holding == 0)
        await pilot.press("space")
        await until(pilot, lambda: app.story.holding == 1)
        await pilot.pause()
        assert app.snapshot.phase in ("rank_dies", "rank_dies_dumping")
        assert on_screen(app, "demo 2/2: a rank died")
        assert on_screen(app, "rank 1 (pid 1025) is gone")
        assert on_screen(app, "space: go on to the summary")
        await pilot.press("space")
        await until(pilot, lambda: app.story.done)
        await pilot.pause()
        text = "\n".join(screen_text(app))
        assert "demo done: 2 of 2 findings shown" in text
        assert "1. stuck: rank 1 (pid 815) is in <module> (worker2.py:37)" in text
        assert "2. died: rank 1 (pid 1025) is gone" in text
        assert "gputui check --demo" in text and "demo done (q quits)" in text
        assert "replay ended" not in text
        assert all(len(line.rstrip()) <= 80 for line in screen_text(app))


async def test_a_demo_started_past_its_findings_ends_on_the_summary_not_on_ok():
    src = ReplaySource.demo(realtime=False, into_demo_s=80.0)  # after both hangs
    app = GputuiApp(src, story=DemoStory())
    async with app.run_test(size=(80, 24)) as pilot:
        await asyncio.wait_for(app.ended_event.wait(), 30)
        await pilot.pause()
        assert on_screen(app, "demo done: 0 of 2 findings shown")
        assert not on_screen(app, "replay ended")


async def test_a_replay_without_the_story_plays_through_as_before():
    app = GputuiApp(fast_demo())
    async with app.run_test(size=(80, 24)) as pilot:
        await asyncio.wait_for(app.ended_event.wait(), 30)
        await pilot.pause()
        assert on_screen(app, "replay ended (q quits)")
        assert not on_screen(app, "demo 1/2")


def test_start_counts_from_where_the_demo_starts():
    plain = ReplaySource.demo(realtime=False)
    later = ReplaySource.demo(realtime=False, into_demo_s=20.0)
    t0 = plain.snaps[0].t
    start = plain.snaps[plain.pos].t - t0
    assert abs(start - demo_offset(plain.snaps)) < 0.5
    assert abs((later.snaps[later.pos].t - t0) - (start + 20.0)) < 0.5
