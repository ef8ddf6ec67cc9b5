"""The first hour, round three (issue 43), on the dashboard: driven through Textual's Pilot
at the sizes a person has (80x24, a 40x12 split pane), reading the screen as drawn.
"""

from __future__ import annotations

import asyncio
import time

from conftest import no_gpu_only
from screen import Answering, on_screen, screen_text, until

from gputui.collect.live import LiveSource
from gputui.collect.source import ReplaySource
from gputui.ui.actions.story import DemoStory
from gputui.ui.app import GputuiApp
from gputui.ui.screens.details import TextScreen
from gputui.ui.screens.dialogs import WriteDialog
from gputui.ui.screens.help import HelpScreen
from gputui.ui.widgets.format import phase_words


def fast_demo() -> ReplaySource:
    return ReplaySource.demo(realtime=False)


# ---------------------------------------------------------------- row 6: small terminals


async def test_at_40x12_the_help_keeps_every_key_in_sight():
    """Two halves side by side squeezed the key column out of a 40-column pane."""
    app = GputuiApp(fast_demo(), story=DemoStory())
    async with app.run_test(size=(40, 12)) as pilot:
        await until(pilot, lambda: app.story.holding == 0)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.pause()
        rows = [ln.strip("│ ▄▂▁▅▆▇█") for ln in screen_text(app)[2:-1]]
        assert rows[0].startswith("?/F1/h") or rows[0].startswith("q ")
        keys = [r.split()[0] for r in rows if r]
        assert keys[:4] == ["q", "?/F1/h", "j", "d"], rows
        cut = [r for r in rows if r.startswith("p ")]
        assert cut and cut[0].endswith("…"), rows  # a label cut says so


async def test_at_40x12_the_key_bar_stays_at_the_stall():
    """The story, the banner and the GPUs pushed the key bar below a 12-line screen."""
    app = GputuiApp(fast_demo(), story=DemoStory())
    async with app.run_test(size=(40, 12)) as pilot:
        await until(pilot, lambda: app.story.holding == 0)
        await pilot.pause()
        text = screen_text(app)
        assert any("STALLED" in ln for ln in text), text
        assert text[-1].startswith(" q quit ? help"), text


async def test_a_column_cut_at_the_right_edge_ends_in_an_ellipsis():
    app = GputuiApp(fast_demo(), story=DemoStory())
    async with app.run_test(size=(60, 20)) as pilot:
        await until(pilot, lambda: app.story.holding == 0)
        await pilot.pause()
        rows = [ln for ln in screen_text(app) if " 814 " in ln or " 815 " in ln]
        assert rows and all(ln.rstrip().endswith("…") for ln in rows), rows


# ---------------------------------------------------------------- row 11: words


def test_recorded_phases_are_said_in_words():
    said = phase_words("stall_in_loop_dumping")
    assert said == "a rank stops entering all_reduce (stacks dumped)"
    assert phase_words("rank_dies_init") == "a rank dies (starting)"
    assert phase_words("my_own_phase") == "my own phase"


async def test_the_demo_at_80x24_speaks_plainly():
    app = GputuiApp(fast_demo(), story=DemoStory())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.story.holding == 0)
        await pilot.pause()
        text = "\n".join(screen_text(app))
        assert "phase:" not in text and "stall_in_loop" not in text, text
        assert "a rank stops entering all_reduce" in screen_text(app)[0]
        await pilot.press("d")
        assert isinstance(app.screen, TextScreen)
        await pilot.pause()
        lines = [ln.strip("│").rstrip() for ln in screen_text(app)]
        body = "\n".join(lines)
        for tag in ("[culprit_line]", "[nvml]", "[context]", "[rank_gone]"):
            assert tag not in body, body
        assert "· stuck at a line: rank 1 (pid 815) is in <module> (worker2.py:37)" in body
        # a bullet that wraps goes on under its text, not at the left edge
        bullets = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("· ")]
        wrapped = [lines[i + 1] for i in bullets if i + 1 < len(lines) and lines[i + 1].strip()]
        follow = [ln for ln in wrapped if not ln.lstrip().startswith(("· ", "rank ", "Next"))]
        assert follow and all(ln.startswith(" " * 5) for ln in follow), lines


def test_the_countdown_never_says_in_0_s():
    story = DemoStory(snaps=fast_demo().snaps)
    first = story.events[0]
    story.check(None, "stall_in_loop_init", first - 0.3)
    assert story.lines()[1][0] == "  the rank stops in 1 s"


async def test_after_the_summary_the_last_line_says_what_space_does_now():
    # In real time at 5x: the rest of the recording plays for about 12 s after the summary.
    app = GputuiApp(ReplaySource.demo(speed=5.0), story=DemoStory())
    async with app.run_test(size=(80, 24)) as pilot:
        for stop in (0, 1):
            await until(pilot, lambda stop=stop: app.story.holding == stop)
            await pilot.press("space")
        await until(pilot, lambda: app.story.done)
        await pilot.pause()
        assert on_screen(app, "space: play the rest of the recording")
        await pilot.press("space")  # it plays on: saying "space: play" now would be untrue
        await until(pilot, lambda: on_screen(app, "the rest of the recording plays"))
        assert not on_screen(app, "space: play the rest")
        await asyncio.wait_for(app.ended_event.wait(), 60)
        await pilot.pause()
        assert on_screen(app, "the recording has ended")


# ---------------------------------------------------------------- row 5: b without a GPU


@no_gpu_only
async def test_b_on_a_machine_without_gpus_writes_a_bundle(tmp_path):
    """It said "no sample yet: nothing to bundle" after minutes of sampling the host."""
    source = LiveSource(interval=0.5)
    app = GputuiApp(source, bundle_dir=tmp_path / "b")
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await asyncio.wait_for(app.first_snapshot.wait(), 30)
            await until(pilot, lambda: bool(app.recent_snapshots))
            await pilot.press("b")
            assert isinstance(app.screen, WriteDialog), [n.message for n in app._notifications]
            await pilot.press("enter")
            await until(pilot, lambda: (tmp_path / "b" / "README.txt").exists(), timeout=60)
    finally:
        source.close()
    assert (tmp_path / "b" / "verdict.json").exists()
    assert (tmp_path / "b" / "host.json").exists()
    # and it replays: the host's processes and the no-GPU words (it said "no samples in file")
    replay = GputuiApp(ReplaySource.from_file(tmp_path / "b" / "trace.jsonl.gz", realtime=False))
    async with replay.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: on_screen(replay, "no GPUs to watch"), timeout=60)
        await until(pilot, lambda: on_screen(replay, "host processes"), timeout=60)
        assert replay.sample_error is None


# ---------------------------------------------------------------- also seen: a paused live view


async def test_a_paused_live_dashboard_is_paused_not_stale(demo_snaps):
    """It said "STALE: NVML not answering" over a pause; and not once it resumes either."""
    app = GputuiApp(Answering(demo_snaps[100]))
    async with app.run_test(size=(100, 30)) as pilot:
        await asyncio.wait_for(app.first_snapshot.wait(), 30)
        await pilot.press("space")
        await until(pilot, lambda: app.sampler.paused and on_screen(app, "PAUSED"))
        paused_at = time.monotonic()
        # long past the stale limit, and the status line checked again since (every 1 s)
        await until(
            pilot, lambda: time.monotonic() - paused_at > app._stale_after() + 1.5, timeout=30
        )
        await pilot.pause()
        assert on_screen(app, "PAUSED (space resumes)") and not on_screen(app, "STALE")
        await pilot.press("space")
        await until(pilot, lambda: app._age() < 1.0)  # samples come again
        assert not on_screen(app, "STALE")
