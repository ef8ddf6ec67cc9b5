"""The guided demo: it holds at each finding until the user goes on, and ends on a summary.

Driven as a person drives it (Textual's Pilot presses the keys) on the bundled recording,
replayed as fast as it can be: the hold must stop the replay at the moment of the finding, not
a sample later, whatever the speed.
"""

from __future__ import annotations

import asyncio

from screen import on_screen, screen_text, until

from gputui.collect.source import ReplaySource, demo_offset
from gputui.ui.actions.story import DemoStory
from gputui.ui.app import GputuiApp
from gputui.ui.screens.details import TextScreen


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


# ---------------------------------------------------------------- the story's pace (issue 33)


def test_the_first_stop_comes_about_15_s_in_not_26():
    """The demo started 8 s before the first job's phase; its first stop came 26 s in with
    "OK no hang" all the while. It starts 2 s before the job's first process now."""
    from gputui.diagnose.hang.detector import diagnose_trace

    src = fast_demo()
    start = src.snaps[src.pos].t
    verdicts = diagnose_trace(src.snaps[src.pos :])
    stall = next(v for v in verdicts if v.alarm)
    assert 12.0 <= stall.t - start <= 18.0, stall.t - start
    first_proc = next(s for s in src.snaps[src.pos :] if s.processes)
    assert 1.0 <= first_proc.t - start <= 3.0


def test_the_story_bar_counts_down_to_the_hang_then_says_the_banner_counts():
    """Read from the recording: when the chapter's hang starts (its first spinning GPU, or
    the moment its dead rank's row goes), then what to watch while the detector counts."""
    src = fast_demo()
    story = DemoStory(snaps=src.snaps)
    first, second = story.events[0], story.events[1]
    gone = next(s.t for s in src.snaps if s.phase == "rank_dies" and len(s.processes) == 1)
    assert second == gone
    assert story.check(None, "stall_in_loop_init", first - 3.2) is False
    assert story.lines()[1][0] == "  the rank stops in 3 s"
    story.check(None, "stall_in_loop", first + 1.0)
    assert (
        story.lines()[1][0]
        == "  rank 1 stopped entering all_reduce: the banner counts rank 0's wait"
    )
    assert all(len(f" {text}") <= 80 for text, _ in story.lines())


def test_the_banner_changes_when_the_dead_ranks_row_goes_not_10_s_later():
    """Part 2: rank 1's process exits and its row goes; the detector needs 10 s of spinning
    for a stall, so the banner stayed "OK no hang" for 10 s as if nothing had happened. It
    says at once what the detector sees: the rank has exited, and the seconds counted."""
    from gputui.diagnose.hang.detector import Detector

    det = Detector()
    src = fast_demo()
    seen = None
    for s in src.snaps:
        v = det.update(s)
        if s.phase == "rank_dies" and 1025 not in {p.pid for p in s.processes}:
            seen = (s, v)
            break
    assert seen is not None
    snap, v = seen
    assert v.state == "ok" and "rank 1 (pid 1025) has exited while its job runs on" in v.reason
    later = next(det.update(s) for s in src.snaps if s.t > snap.t + 3.0)
    assert (
        "no hang yet: GPU 0 has spun" in later.reason
        and "a stall is called at 10 s" in later.reason
    )


async def test_at_the_dead_rank_p_says_the_rank_is_gone_not_its_peers_stack():
    app = GputuiApp(fast_demo(), story=DemoStory())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.story.holding == 0)
        await pilot.press("space")
        await until(pilot, lambda: app.story.holding == 1)
        await pilot.pause()
        assert on_screen(app, "d why it is gone") and not on_screen(app, "p its stack")
        await pilot.press("p")
        assert on_screen(app, "rank 1 (pid 1025) is gone: its process exited, so it has no")
        assert not on_screen(app, "synchronize (torch/cuda/__init__.py")  # rank 0's stack
        await pilot.press("escape", "down", "p")  # a row chosen by hand: its own stack
        assert on_screen(app, "recorded py-spy dump of pid 1024")


async def test_the_details_of_a_replay_suggest_what_works_in_a_replay():
    """`gputui dump 815` fails in the demo: the processes ran on the recorded node."""
    app = GputuiApp(fast_demo(), story=DemoStory())
    async with app.run_test(size=(100, 60)) as pilot:
        for stop in (0, 1):
            await until(pilot, lambda stop=stop: app.story.holding == stop)
            await pilot.press("d")
            text = "\n".join(screen_text(app))
            assert "gputui dump" not in text and "n adds native frames" not in text, text
            assert "This is a replay: its processes ran on the recorded node" in text
            await pilot.press("escape", "space")
