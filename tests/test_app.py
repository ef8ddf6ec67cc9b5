"""The dashboard driven as a person drives it, through Textual's Pilot, read off the screen.

Replays of the real 2 x H200 recording (and an 8-GPU hang built from its readings) stand in
for a live node. Every assertion is about what is on the screen, at the sizes people have:
80x24 (a default terminal, a split tmux pane), 100x30, 120x40 with 8 GPUs, 200x60.
"""

from __future__ import annotations

import asyncio

import pytest
from conftest import no_gpu_only
from hangs import eight_gpu_hang, hang_window
from screen import on_screen, run_to_end, screen_text, until
from textual.containers import VerticalScroll

from gputui.collect.source import ReplaySource
from gputui.ui.actions.story import DemoStory
from gputui.ui.app import GputuiApp
from gputui.ui.screens.help import LABEL_WIDTH, LABELS, TABLE_KEYS, HelpScreen
from gputui.ui.widgets.gpu_board import GpuBoard
from gputui.ui.widgets.process_table import ProcessTable

DEMO_CMD = "/opt/torch/.venv/bin/python3 ./worker2.py stall_in_loop 35"


def table(app: GputuiApp) -> ProcessTable:
    return app.query_one(ProcessTable)


def pids_shown(app: GputuiApp) -> list[int]:
    return [r.proc.pid for r in table(app).rows if r.proc is not None]


@pytest.mark.parametrize(
    "size, hang, suspect_pid",
    [
        ((80, 24), "demo", 815),
        ((100, 30), "demo", 815),
        ((120, 40), "8gpu", 1005),
        ((200, 60), "8gpu", 1005),
        ((200, 60), "demo", 815),
    ],
    ids=["80x24", "100x30", "120x40-8gpu", "200x60-8gpu", "200x60"],
)
async def test_at_a_stall_the_banner_the_suspect_gpu_and_its_row_are_all_on_screen(
    demo_snaps, size, hang, suspect_pid
):
    source = hang_window(demo_snaps) if hang == "demo" else eight_gpu_hang()
    app = GputuiApp(source)
    async with app.run_test(size=size) as pilot:
        await run_to_end(app, pilot)
        lines = screen_text(app)
        assert any("STALLED" in ln for ln in lines), "the banner"
        assert any("SUSPECT" in ln for ln in lines), "the suspect GPU's line or panel"
        row = [ln for ln in lines if f" {suspect_pid} " in ln and "SUSP" in ln]
        assert row, f"the suspect's process row (pid {suspect_pid})"
        assert all(len(ln) <= size[0] for ln in lines)


async def test_small_terminals_get_one_line_per_gpu_and_large_ones_panels(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps))
    async with app.run_test(size=(80, 24)) as pilot:
        await run_to_end(app, pilot)
        board = app.query_one(GpuBoard)
        assert board.mode == "compact"
        assert len(board.lines_text) == 3  # a header and one line per GPU
        await pilot.resize_terminal(200, 60)
        await pilot.pause()
        assert board.mode == "full"
        assert on_screen(app, "╭─ GPU 0 · H200")
        await pilot.resize_terminal(80, 24)  # and back, at once: no step late
        await pilot.pause()
        assert board.mode == "compact" and not on_screen(app, "╭─ GPU 0")


async def test_v_cycles_the_gpu_view(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=3))
    async with app.run_test(size=(140, 40)) as pilot:
        await run_to_end(app, pilot)
        board = app.query_one(GpuBoard)
        assert board.mode == "full"
        await pilot.press("v")
        assert board.view == "compact" and board.mode == "compact"
        await pilot.press("v", "v")
        assert board.view == "auto"


async def test_the_history_fills_the_line_instead_of_sixteen_samples(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=30))
    async with app.run_test(size=(160, 40)) as pilot:
        await run_to_end(app, pilot)
        await pilot.press("v")  # one line per GPU
        gpu0 = next(ln for ln in screen_text(app) if ln.startswith(" 0 H200"))
        bars = sum(ch in "▁▂▃▄▅▆▇█" for ch in gpu0)
        assert bars >= 80


async def test_demo_replay_shows_both_gpus_and_the_worker_processes(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps))
    async with app.run_test(size=(140, 40)) as pilot:
        await run_to_end(app, pilot)
        assert on_screen(app, "GPU 0 · H200") and on_screen(app, "GPU 1 · H200")
        assert sorted(pids_shown(app)) == [814, 815]
        assert {r.proc.command for r in table(app).rows if r.proc} == {DEMO_CMD}


async def test_j_selects_the_suspect_and_scrolls_it_into_view(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps))
    async with app.run_test(size=(80, 24)) as pilot:
        await run_to_end(app, pilot)
        await pilot.press("j")
        assert table(app).selected().pid == 815


async def test_filter_keeps_matching_rows_and_escape_clears_it(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps))
    async with app.run_test(size=(100, 30)) as pilot:
        await run_to_end(app, pilot)
        await pilot.press("slash", *"815", "enter")
        assert pids_shown(app) == [815]
        assert on_screen(app, "filter: 815")
        await pilot.press("escape")  # the prompt is closed: escape clears the filter
        assert sorted(pids_shown(app)) == [814, 815]
        assert not on_screen(app, "filter: 815")


async def test_typing_in_the_filter_does_not_trigger_keys(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=3))
    async with app.run_test(size=(100, 30)) as pilot:
        await run_to_end(app, pilot)
        await pilot.press("slash", *"quit", "escape")  # q must not quit while typing
        assert app.is_running and pids_shown(app)


async def test_sort_keys_move_the_sort_column_and_reverse_it(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps))
    async with app.run_test(size=(140, 40)) as pilot:
        await run_to_end(app, pilot)
        t = table(app)
        assert t.sort_by == "gpu" and pids_shown(app) == [814, 815]
        await pilot.press("I")
        assert t.reverse and pids_shown(app) == [815, 814]
        assert on_screen(app, "GPU▲")
        await pilot.press("greater_than_sign")
        assert t.sort_by == "pid"
        await pilot.press("less_than_sign", "less_than_sign")
        assert t.sort_by == "flag" or t.sort_by != "pid"


async def test_clicking_a_header_sorts_by_it_and_again_reverses(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps))
    async with app.run_test(size=(140, 40)) as pilot:
        await run_to_end(app, pilot)
        t = table(app)
        header = t.lines_text[0]
        x = header.index("CPU%")
        await pilot.click(ProcessTable, offset=(x, 0))
        assert t.sort_by == "cpu" and not t.reverse
        assert pids_shown(app)[0] == 814  # rank 0 spins at 100% CPU
        await pilot.click(ProcessTable, offset=(x, 0))
        assert t.reverse and pids_shown(app)[0] == 815


async def test_t_shows_the_job_as_a_tree_of_its_ranks(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps))
    async with app.run_test(size=(140, 40)) as pilot:
        await run_to_end(app, pilot)
        await pilot.press("t")
        lines = screen_text(app)
        head = next(i for i, ln in enumerate(lines) if "▾ job 127.0.0.1:29512" in ln)
        assert "├─ " in lines[head + 1] and " 814 " in lines[head + 1]
        assert "└─ " in lines[head + 2] and " 815 " in lines[head + 2]
        await pilot.press("down")  # the heading is skipped: rows are processes
        assert table(app).selected().pid == 815


async def test_page_and_edge_keys_move_through_a_long_table():
    app = GputuiApp(eight_gpu_hang(seconds=2))
    async with app.run_test(size=(100, 24)) as pilot:
        await run_to_end(app, pilot)
        t = table(app)
        await pilot.press("end")
        assert t.selected().pid == 1007 and on_screen(app, " 1007 ")
        await pilot.press("home")
        assert t.selected().pid == 1000
        await pilot.press("pagedown")
        assert t.selected().pid > 1001


async def test_a_terminal_too_short_for_every_gpu_keeps_the_suspect_and_the_spinners():
    app = GputuiApp(eight_gpu_hang(stuck=7))
    async with app.run_test(size=(80, 18)) as pilot:
        await run_to_end(app, pilot)
        lines = screen_text(app)
        assert any(ln.startswith(" 7 ") and "SUSPECT" in ln for ln in lines)
        assert any("more GPU(s)" in ln for ln in lines)
        assert any(" 1007 " in ln and "SUSP" in ln for ln in lines)


async def test_d_shows_the_verdict_details(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps))
    async with app.run_test(size=(100, 30)) as pilot:
        await run_to_end(app, pilot)
        await pilot.press("d")
        assert on_screen(app, "verdict details") and on_screen(app, "Next steps")
        await pilot.press("escape")
        assert not on_screen(app, "verdict details")


async def test_help_fits_in_80_columns_and_lists_every_key(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=2))
    async with app.run_test(size=(80, 60)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = "\n".join(screen_text(app))
        for b in app.BINDINGS:
            assert b.id in LABELS, f"no help label for {b.id}"
            assert len(LABELS[b.id]) <= LABEL_WIDTH and LABELS[b.id] in text  # whole
        assert "pause sampling" in text
        await pilot.press("escape")
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)


async def test_help_fits_80x24_whole_without_scrolling_and_says_what_space_does_in_the_demo():
    """At 24 rows the help needed scrolling; in the demo it said space pauses, where space
    goes on from the stop the demo holds at."""
    app = GputuiApp(ReplaySource.demo(realtime=False), story=DemoStory())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        text = screen_text(app)
        last_key, last_label = TABLE_KEYS[-1]
        assert any(last_key in ln and last_label in ln for ln in text), "\n".join(text)
        assert any("STALE: no sample" in ln for ln in text), "the notes' end is on screen"
        assert any("space" in ln and "demo: go on; else pause" in ln for ln in text)
        scroll = app.screen.query_one(VerticalScroll)
        assert scroll.max_scroll_y == 0, "nothing to scroll at 80x24"


async def test_the_command_palette_offers_gputuis_actions(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=2))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+p", *"py-spy")
        await until(pilot, lambda: on_screen(app, "Python stack (py-spy dump)"))


async def test_q_quits(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=2))
    async with app.run_test() as pilot:
        await pilot.press("q")
    assert app.return_code == 0


@no_gpu_only
async def test_without_gpus_it_starts_shows_host_processes_and_says_why():
    from gputui.collect.live import LiveSource

    app = GputuiApp(LiveSource(interval=0.5))
    async with app.run_test(size=(100, 30)) as pilot:
        await asyncio.wait_for(app.first_snapshot.wait(), 30)
        await pilot.pause()
        assert on_screen(app, "no GPUs to watch") and on_screen(app, "gputui --demo")
        assert pids_shown(app)


class Wedged:
    """A source whose samples block after `good` of them, as NVML does when a GPU falls off
    the bus (good=0: the very first sample never comes)."""

    kind, description = "nvml", "wedged"

    def __init__(self, snaps, good: int) -> None:
        import threading

        self.snaps, self.good, self.calls = snaps, good, 0
        self.release = threading.Event()

    def sample(self):
        self.calls += 1
        if self.calls > self.good:
            self.release.wait(60)
        return self.snaps[100]

    def next_delay(self) -> float:
        return 0.05

    def close(self) -> None:
        self.release.set()


@pytest.mark.parametrize("good", [1, 0], ids=["after-a-sample", "before-the-first"])
async def test_a_stuck_sampler_shows_stale_while_the_ui_keeps_answering(demo_snaps, good):
    source = Wedged(demo_snaps, good)
    app = GputuiApp(source)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            # The status line turns STALE after 3 intervals + 2 s with no sample (2.15 s).
            await until(pilot, lambda: on_screen(app, "STALE"), timeout=10)
            await pilot.press("question_mark")  # the UI still answers keys
            assert isinstance(app.screen, HelpScreen)
    finally:
        source.close()
