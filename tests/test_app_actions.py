"""The tool keys of the dashboard, pressed on a real process and on a replayed one.

A live node is stood in for by a source that reports real child processes of this test (no
GPU needed): the keys must open a pane that runs the real tool on the selected worker. In a
replay the pids belong to the recorded node, so the keys must refuse with a clear message.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from hangs import hang_window
from screen import on_screen, run_to_end, until
from targets.launch import Targets
from test_tool_pane import log_text, needs_py_spy, needs_strace

from gputui.collect.model import Snapshot
from gputui.collect.procs.jobs import group_jobs
from gputui.collect.procs.reader import ProcessReader
from gputui.ui.app import GputuiApp
from gputui.ui.screens.tool_pane import DumpAllPane, ToolPane
from gputui.ui.widgets.process_table import ProcessTable


class LiveProcesses:
    """A live source over given pids: real psutil readings each tick, no GPU readings."""

    kind = "host"
    description = "test: live host processes"

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.reader = pids, ProcessReader()

    def sample(self) -> Snapshot | None:
        procs = tuple(self.reader.read({pid: ((0,), None) for pid in self.pids}))
        return Snapshot(t=time.time(), processes=procs, jobs=group_jobs(procs), source="host")

    def next_delay(self) -> float:
        return 0.2

    def close(self) -> None:
        pass


@pytest.fixture
def targets() -> Iterator[Targets]:
    t = Targets()
    yield t
    t.close()


def rows(app: GputuiApp) -> int:
    return sum(r.proc is not None for r in app.query_one(ProcessTable).rows)


@needs_py_spy
async def test_p_dumps_the_python_stack_of_the_selected_worker(targets):
    worker = targets.start("loader")
    app = GputuiApp(LiveProcesses([worker.pid]))
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: rows(app) == 1)
        await pilot.press("p")
        assert isinstance(app.screen, ToolPane)
        pane = app.screen
        await until(pilot, lambda: "wait_for_the_data_loader" in log_text(pane))
        await pilot.press("escape")
        assert not isinstance(app.screen, ToolPane)


@needs_py_spy
async def test_a_dumps_every_rank_of_the_job_and_groups_identical_stacks(targets):
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511", "WORLD_SIZE": "3"}
    ranks = [
        targets.start("allreduce", env={**env, "RANK": "0"}),
        targets.start("allreduce", env={**env, "RANK": "1"}),
        targets.start("loader", env={**env, "RANK": "2"}),
    ]
    app = GputuiApp(LiveProcesses([p.pid for p in ranks]))
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: rows(app) == 3)
        await pilot.press("a")
        assert isinstance(app.screen, DumpAllPane)
        pane = app.screen
        await until(pilot, lambda: "wait_for_the_data_loader" in log_text(pane))
        text = log_text(pane)
        assert "ranks 0,1 (2 processes)" in text and "all_reduce" in text
        assert "2 distinct stacks" in text
        assert "stands out: rank 2" in text


async def test_tool_keys_on_a_replay_say_the_process_is_not_here(demo_snaps):
    app = GputuiApp(hang_window(demo_snaps, seconds=3))
    async with app.run_test(size=(140, 40)) as pilot:
        await run_to_end(app, pilot)
        for key in ("p", "n", "g", "T", "k"):
            await pilot.press(key)
            assert not isinstance(app.screen, ToolPane), key
            messages = [n.message for n in app._notifications]
            assert len(messages) == 1, key  # one at a time: they never pile up
            assert "replay" in messages[0] and "not here" in messages[0]


async def test_k_asks_which_signal_then_sends_it_to_the_selected_process(targets):
    worker = targets.start("loader")
    app = GputuiApp(LiveProcesses([worker.pid]))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: rows(app) == 1)
        await pilot.press("k")
        assert on_screen(app, f"Send a signal to pid {worker.pid}?")
        await pilot.press("t")  # SIGTERM
        assert worker.wait(timeout=10) == -15
        assert any("sent SIGTERM" in n.message for n in app._notifications)


async def test_k_escape_sends_nothing(targets):
    worker = targets.start("loader")
    app = GputuiApp(LiveProcesses([worker.pid]))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: rows(app) == 1)
        await pilot.press("k", "escape")
        assert not on_screen(app, "Send a signal")
    assert worker.poll() is None


async def test_e_shows_the_environment_with_secrets_redacted(targets):
    secret = "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuV"
    worker = targets.start("loader", env={"HF_TOKEN": secret, "MY_SETTING": "visible-value"})
    app = GputuiApp(LiveProcesses([worker.pid]))
    async with app.run_test(size=(120, 60)) as pilot:
        await until(pilot, lambda: rows(app) == 1)
        await pilot.press("e")
        assert on_screen(app, "MY_SETTING=visible-value")
        assert on_screen(app, "HF_TOKEN=<redacted>")
        assert not on_screen(app, secret)


@needs_strace
async def test_T_on_pid_1_asks_first_and_no_means_no():
    app = GputuiApp(LiveProcesses([1]))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: rows(app) == 1)
        await pilot.press("T")
        assert on_screen(app, "strace pid 1?")
        await pilot.press("n")
        assert not isinstance(app.screen, ToolPane)
