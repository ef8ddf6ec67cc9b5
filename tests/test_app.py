"""The dashboard driven as a person drives it, through Textual's Pilot."""

from __future__ import annotations

import asyncio

from conftest import no_gpu_only

from gputui.collect.source import ReplaySource
from gputui.ui.app import GputuiApp
from gputui.ui.gpu_panel import GpuPanel
from gputui.ui.help_screen import HelpScreen
from gputui.ui.process_table import ProcessTable


def hang_window(demo_snaps, phase="stall_in_loop", seconds=20.0):
    """The demo from the start of `phase` for `seconds`, replayed as fast as possible."""
    start = next(i for i, s in enumerate(demo_snaps) if s.phase == phase)
    t0 = demo_snaps[start].t
    snaps = [s for s in demo_snaps[start:] if s.t - t0 <= seconds]
    return ReplaySource(snaps, name="test", realtime=False)


async def run_to_end(app, pilot):
    await asyncio.wait_for(app.ended_event.wait(), 30)
    await pilot.pause()


async def test_demo_replay_shows_both_gpu_panels_and_the_worker_processes(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps))
    async with app.run_test(size=(140, 40)) as pilot:
        await run_to_end(app, pilot)
        panels = list(app.query(GpuPanel))
        assert [p.index for p in panels] == [0, 1]
        assert "H200" in str(panels[0].render_text())
        table = app.query_one(ProcessTable)
        assert table.row_count == 2
        cmds = {p.command for p in table.procs.values()}
        assert cmds == {"/opt/torch/.venv/bin/python3 ./worker2.py stall_in_loop 35"}


async def test_process_rows_are_updated_in_place_not_rebuilt(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=5))
    async with app.run_test(size=(140, 40)) as pilot:
        await run_to_end(app, pilot)
        table = app.query_one(ProcessTable)
        keys_before = list(table.rows)
        snap = app.snapshot
        table.apply(snap.processes, snap.jobs, snap.t + 60)  # one minute later: elapsed changes
        assert list(table.rows) == keys_before


async def test_filter_keeps_matching_rows_and_escape_clears_it(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps))
    async with app.run_test(size=(140, 40)) as pilot:
        await run_to_end(app, pilot)
        table = app.query_one(ProcessTable)
        await pilot.press("slash", *"815", "enter")
        assert [p.pid for p in table.procs.values()] == [815]
        await pilot.press("slash", "escape")
        assert table.row_count == 2


async def test_sort_key_cycles_columns(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps))
    async with app.run_test(size=(140, 40)) as pilot:
        await run_to_end(app, pilot)
        await pilot.press("s")
        assert app.query_one(ProcessTable).sort_by == "CPU%"
        first = app.query_one(ProcessTable).selected()
        assert first is not None and first.pid == 814  # rank 0 spins at 100% CPU


async def test_help_lists_every_binding_and_closes(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=2))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert {b.id for b in app.screen.bindings_list} >= {
            "quit",
            "help",
            "filter",
            "sort",
            "py_spy",
            "dump_all",
            "probe",
        }
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_q_quits(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=2))
    async with app.run_test() as pilot:
        await pilot.press("q")
    assert app.return_code == 0


@no_gpu_only
async def test_without_gpus_it_starts_shows_host_processes_and_says_why():
    from gputui.collect.live import LiveSource

    app = GputuiApp(LiveSource(interval=0.5))
    async with app.run_test(size=(140, 40)) as pilot:
        await asyncio.wait_for(app.first_snapshot.wait(), 30)
        await pilot.pause()
        text = str(app.query_one("#nogpu").render())
        assert "No GPUs" in text and "gputui --demo" in text
        assert app.query_one(ProcessTable).row_count > 0


async def test_a_stuck_sampler_shows_stale_data_while_the_ui_keeps_answering(demo_snaps):
    import threading

    release = threading.Event()

    class WedgedAfterOne:
        """A source whose second sample blocks, as NVML does when a GPU falls off the bus."""

        kind, description = "nvml", "wedged"

        def __init__(self):
            self.calls = 0

        def sample(self):
            self.calls += 1
            if self.calls > 1:
                release.wait(60)
            return demo_snaps[100]

        def next_delay(self):
            return 0.05

        def close(self):
            release.set()

    app = GputuiApp(WedgedAfterOne())
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            await asyncio.wait_for(app.first_snapshot.wait(), 10)
            app.received_at -= 30  # as if 30 s had passed with no new sample
            app._refresh_status()
            assert "STALE" in str(app.query_one("#status").render())
            await pilot.press("question_mark")  # the UI still answers keys
            assert isinstance(app.screen, HelpScreen)
    finally:
        release.set()
