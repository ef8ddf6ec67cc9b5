"""In a replay, every key that can work on recorded data works on it; the others say so once.

`a` groups the stacks the recording holds, `b` writes the bundle of the recorded moment (named
for the recorded node, with its stacks, not this machine's topology); `k` and `P` cannot act
on the recorded node and say so, one message at a time, which esc dismisses.
"""

from __future__ import annotations

import json

from hangs import hang_window
from screen import on_screen, screen_text, until

from gputui.collect.source import ReplaySource
from gputui.ui.app import GputuiApp
from gputui.ui.screens.details import TextScreen
from gputui.ui.screens.dialogs import WriteDialog
from gputui.ui.screens.tool_pane import ToolPane


def demo_at_stall() -> ReplaySource:
    """The demo up to the moment its stall has stacks, then it stops there."""
    src = ReplaySource.demo(realtime=False)
    t0 = src.snaps[0].t
    src.snaps = [s for s in src.snaps if s.t - t0 <= 80.0]  # stall_in_loop_dumping, +6 s
    return src


async def test_a_shows_every_ranks_recorded_stack_grouped_the_odd_rank_first():
    app = GputuiApp(demo_at_stall())
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.ended and bool(app.verdict.stacks))
        await pilot.press("a")
        assert isinstance(app.screen, TextScreen)
        assert on_screen(app, "2 rank(s) in 2 group(s), recorded at the stall")
        lines = [ln.strip(" │") for ln in screen_text(app)]
        odd = next(i for i, ln in enumerate(lines) if ln.startswith("ODD  rank 1"))
        waiting = next(i for i, ln in enumerate(lines) if ln.startswith("rank 0 (pid 814)"))
        assert odd < waiting
        assert lines[odd + 1].strip() == "<module> (worker2.py:37)"


async def test_a_before_any_stall_says_the_recording_has_no_stacks_yet(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=3))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.ended)
        await pilot.press("a")
        assert not isinstance(app.screen, (TextScreen, ToolPane))
        assert [n.message for n in app._notifications] == [
            "all ranks: the recording holds no stacks at this moment (they are taken when a "
            "job stalls)"
        ]


async def test_b_writes_the_bundle_of_the_recorded_moment(tmp_path):
    app = GputuiApp(demo_at_stall(), bundle_dir=tmp_path / "b")
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.ended and bool(app.verdict.stacks))
        await pilot.press("b")
        assert isinstance(app.screen, WriteDialog)  # where, before anything is written
        assert str(tmp_path / "b") in app.screen.question and not (tmp_path / "b").exists()
        await pilot.press("enter")
        assert isinstance(app.screen, ToolPane)
        await until(pilot, lambda: (tmp_path / "b" / "README.txt").exists())
    out = tmp_path / "b"
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["state"] == "stalled" and verdict["suspect_pids"] == [815]
    groups = (out / "stacks" / "groups.txt").read_text()
    assert "ODD  rank 1 (pid 815)" in groups and "<module> (worker2.py:37)" in groups
    readme = (out / "README.txt").read_text()
    assert "of demo-h200x2-hang" in readme
    assert "a replay of demo-h200x2-hang: topology not recorded" in readme
    assert not (out / "topology.txt").exists()  # this machine's would describe another node


async def test_b_says_the_full_path_first_and_esc_writes_nothing(tmp_path, monkeypatch):
    """b wrote into the current directory without saying where. The default place is
    ./gputui-bundle-HOST-TIME: the question names it in full."""
    monkeypatch.chdir(tmp_path)
    app = GputuiApp(demo_at_stall())
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.ended and bool(app.verdict.stacks))
        await pilot.press("b")
        assert isinstance(app.screen, WriteDialog)
        where = app.screen.question.splitlines()[-1]
        assert where.startswith(f"{tmp_path}/gputui-bundle-demo-h200x2-hang-"), where
        await pilot.press("escape")
        assert not isinstance(app.screen, WriteDialog)
    assert list(tmp_path.iterdir()) == []


async def test_a_bundle_written_with_b_replays_to_the_verdict_on_screen(tmp_path):
    from gputui.collect.trace.read import read_trace
    from gputui.commands.moment import verdicts

    app = GputuiApp(demo_at_stall(), bundle_dir=tmp_path / "b")
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.ended and bool(app.verdict.stacks))
        shown = app.verdict
        await pilot.press("b", "enter")
        await until(pilot, lambda: (tmp_path / "b" / "README.txt").exists())
    again = verdicts(read_trace(tmp_path / "b" / "trace.jsonl.gz"))[-1]
    assert (again.state, again.reason) == (shown.state, shown.reason)


async def test_refusals_never_pile_up_and_esc_dismisses_them(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=3))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.ended)
        for key in ("k", "k", "g", "k", "P"):
            await pilot.press(key)
            assert len(app._notifications) == 1, key
        assert "probe: it tests this machine's GPUs" in list(app._notifications)[0].message
        await pilot.press("escape")
        assert len(app._notifications) == 0


async def test_a_pane_opens_without_a_message_over_it():
    app = GputuiApp(demo_at_stall())
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.ended and bool(app.verdict.stacks))
        await pilot.press("k")
        assert len(app._notifications) == 1
        await pilot.press("d")
        assert isinstance(app.screen, TextScreen)
        assert len(app._notifications) == 0
