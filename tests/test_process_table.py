"""The process table repaints only the lines that changed, and what it draws stays right.

ProcessTable caches each row's line and asks Textual to repaint only the lines that differ
from the screen. The risk of a cache is a stale screen, so these tests compare what a table
shows after a series of updates with what a fresh table shows for the same data, and count
what is repainted.
"""

from __future__ import annotations

from dataclasses import replace

from textual.app import App, ComposeResult

from gputui.collect.model import ProcessInfo
from gputui.ui.widgets.process_table import ProcessTable

NOW = 1_000_000.0


def procs(n: int, cpu: dict[int, float] | None = None) -> list[ProcessInfo]:
    cpu = cpu or {}
    return [
        ProcessInfo(
            pid=100 + i,
            create_time=NOW - 60 * (i + 1),
            user="alice",
            cmdline=("python", "train.py", f"--shard={i}"),
            state="running" if i % 3 else "sleeping",
            cpu_percent=cpu.get(i, 10.0 + i),
            rss_mb=512.0 + i,
            gpus=(0,),
            gpu_mem_mb=1024.0,
        )
        for i in range(n)
    ]


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ProcessTable()


def screen_of(table: ProcessTable) -> list[str]:
    return [table.render_line(y).text for y in range(table.size.height)]


async def test_a_sample_that_changes_two_rows_repaints_two_lines():
    before = procs(20)
    after = procs(20, cpu={3: 97.0, 11: 0.0})
    app = TableApp()
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(ProcessTable)
        table.apply(before, [], NOW)
        await pilot.pause()
        repainted: list = []
        real = table.refresh

        def spy(*regions, **kw):
            repainted.extend(regions or ["all"])
            return real(*regions, **kw)

        table.refresh = spy  # type: ignore[method-assign]
        table.apply(after, [], NOW)
        ys = sorted(r.y for r in repainted)
    shown = {103: 4, 111: 12}  # sorted by GPU then pid: pid 100 + i is on line i + 1
    assert ys == sorted(shown.values())


async def shown_after(*updates: list[ProcessInfo], flags=None) -> list[str]:
    app = TableApp()
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(ProcessTable)
        for update in updates:
            table.apply(update, [], NOW, flags)
            await pilot.pause()
        return screen_of(table)


async def test_a_changed_cell_is_redrawn_and_the_rest_stays_as_a_fresh_table_draws_it():
    before = procs(20)
    after = procs(20, cpu={3: 97.0, 11: 0.0})
    assert await shown_after(before, after) == await shown_after(after)


async def test_many_updates_in_a_row_leave_no_stale_cell():
    updates = [procs(20, cpu={k: 5.0 * step for k in range(0, 20, step)}) for step in (1, 2, 3, 4)]
    screen = await shown_after(*updates)
    assert screen == await shown_after(updates[-1])
    assert any("15" in line for line in screen)  # the last update's figures are on screen


async def test_a_changed_flag_and_state_are_redrawn():
    before = procs(10)
    after = [replace(p, state="stopped") if p.pid == 104 else p for p in before]
    flags = {104: "suspect"}
    app = TableApp()
    async with app.run_test(size=(120, 20)) as pilot:
        table = app.query_one(ProcessTable)
        table.apply(before, [], NOW)
        await pilot.pause()
        table.apply(after, [], NOW, flags)
        await pilot.pause()
        row = next(line for line in screen_of(table) if " 104 " in line)
    assert "SUSPECT" in row and "stopped" in row


async def test_the_cursor_row_moves_correctly_over_cached_rows():
    app = TableApp()
    async with app.run_test(size=(120, 20)) as pilot:
        table = app.query_one(ProcessTable)
        table.apply(procs(10), [], NOW)
        await pilot.pause()
        await pilot.press("down", "down")
        table.apply(procs(10, cpu={2: 55.0}), [], NOW)
        await pilot.pause()
        assert table.selected() is not None and table.selected().pid == 102
        moved = screen_of(table)
    fresh = TableApp()
    async with fresh.run_test(size=(120, 20)) as pilot:
        table = fresh.query_one(ProcessTable)
        table.apply(procs(10, cpu={2: 55.0}), [], NOW)
        await pilot.pause()
        await pilot.press("down", "down")
        assert screen_of(table) == moved


async def test_until_a_row_is_chosen_the_selection_is_the_top_row_as_the_rows_re_sort():
    """The first frame lists processes before their CPU% is known, pid 1 on top; the next
    sorts by CPU%. The selection clung to pid 1, and `p` then dumped init."""
    app = TableApp()
    async with app.run_test(size=(120, 20)) as pilot:
        table = app.query_one(ProcessTable)
        table.sort("cpu")
        table.apply(procs(6, cpu={i: 0.0 for i in range(6)}), [], NOW)
        await pilot.pause()
        first = table.selected()
        table.apply(procs(6, cpu={4: 90.0}), [], NOW)
        await pilot.pause()
        top = next(r.proc for r in table.rows if r.proc is not None)
        assert first is not None and first.pid != top.pid
        assert table.selected() is top and top.pid == 104 and not table.chosen


async def test_a_chosen_process_is_followed_across_re_sorts_not_its_line():
    app = TableApp()
    async with app.run_test(size=(120, 20)) as pilot:
        table = app.query_one(ProcessTable)
        table.sort("cpu")
        table.apply(procs(6), [], NOW)  # CPU% 10 + i: pid 105 on top
        await pilot.pause()
        await pilot.press("down")  # pid 104, the second line
        assert table.selected().pid == 104 and table.chosen
        table.apply(procs(6, cpu={1: 99.0, 4: 0.0}), [], NOW)  # 104 goes to the bottom
        await pilot.pause()
        assert table.selected().pid == 104
        assert [r.proc.pid for r in table.rows][-1] == 104


def test_the_command_column_leaves_out_the_programs_directory():
    """At 80 columns `/opt/torch/.venv/bin/python3` would hide the script (seen on the device)."""
    from gputui.collect.model import ProcessInfo
    from gputui.ui.widgets.rows import cells, shown_command

    p = ProcessInfo(pid=7, cmdline=("/opt/torch/.venv/bin/python3", "/w/train.py", "--lr", "1"))
    assert shown_command(p) == "python3 /w/train.py --lr 1"
    assert cells(p, None, 0.0, wide=False)["command"] == "python3 /w/train.py --lr 1"
    assert shown_command(ProcessInfo(pid=8, name="kworker")) == "kworker"
    assert shown_command(ProcessInfo(pid=9, cmdline=("/",))) == "/"
