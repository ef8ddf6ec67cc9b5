"""The tool pane driven through Textual's Pilot: lines stream in, escape stops the tool,
`s` saves the output, dump-all shows the grouped stacks."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator

import psutil
import pytest
from targets.launch import Targets
from test_tools import sleeping_natively
from textual.app import App
from textual.widgets import RichLog, Static

from gputui.collect.model import Job, ProcessInfo, RankInfo, Snapshot
from gputui.tools.attach import ptrace
from gputui.tools.attach.stacks import py_spy_dump
from gputui.tools.result import Outcome
from gputui.tools.runner import run_tool
from gputui.tools.which import find_tool
from gputui.ui.screens.tool_pane import (
    DumpAllPane,
    ToolPane,
    dump_all_pane,
    py_spy_pane,
    strace_pane,
)

needs_py_spy = pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")
needs_strace = pytest.mark.skipif(find_tool("strace") is None, reason="strace is not installed")


@pytest.fixture
def targets() -> Iterator[Targets]:
    t = Targets()
    yield t
    t.close()


class PaneApp(App[None]):
    """The smallest host for a pane: a base screen, and the pane pushed on top."""

    def __init__(self, pane: ToolPane) -> None:
        super().__init__()
        self.pane = pane

    def on_mount(self) -> None:
        self.push_screen(self.pane)


async def until(pilot, cond: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await pilot.pause(0.05)


def log_text(pane: ToolPane) -> str:
    log = pane.query_one(RichLog)
    return "\n".join("".join(seg.text for seg in strip) for strip in log.lines)


def children_named(name: str) -> list[psutil.Process]:
    out = []
    for c in psutil.Process().children(recursive=True):
        try:
            if c.name() == name:
                out.append(c)
        except psutil.Error:
            pass
    return out


@needs_py_spy
async def test_py_spy_lines_appear_in_the_pane_with_the_outcome(targets):
    p = targets.start("loader")
    proc = ProcessInfo(pid=p.pid, create_time=psutil.Process(p.pid).create_time())
    pane = py_spy_pane(proc)
    async with PaneApp(pane).run_test(size=(120, 30)) as pilot:
        await until(pilot, pane.finished.is_set)
        await pilot.pause(0.2)
        assert "wait_for_the_data_loader (blocked.py:" in log_text(pane)
        outcome = str(pane.query_one("#tool-outcome", Static).render())
        assert f"py-spy pid {p.pid}: done" in outcome
        assert pane.query_one("#tool-outcome").has_class("-ok")


async def test_escape_cancels_a_running_tool_and_its_process_is_gone():
    pane = ToolPane(
        "sleep",
        lambda on_line, cancel: run_tool(
            [sys.executable, "-c", "import time\nprint('started', flush=True)\ntime.sleep(60)"],
            timeout=60,
            on_line=on_line,
            cancel=cancel,
        ),
    )
    app = PaneApp(pane)
    async with app.run_test(size=(100, 24)) as pilot:
        await until(pilot, lambda: "started" in log_text(pane))
        kids = [
            c
            for c in psutil.Process().children(recursive=True)
            if "time.sleep" in " ".join(c.cmdline())
        ]
        assert len(kids) == 1
        await pilot.press("escape")
        assert app.screen is not pane  # closed at once, without waiting for the tool
        await asyncio.to_thread(pane.finished.wait, 10)
        assert pane.result.outcome is Outcome.CANCELLED
        assert not kids[0].is_running() or kids[0].status() == psutil.STATUS_ZOMBIE


@needs_strace
async def test_escape_stops_strace_and_leaves_the_target_running(targets):
    p = targets.start("loader", tick=0.01)
    pane = strace_pane(ProcessInfo(pid=p.pid), seconds=60)
    async with PaneApp(pane).run_test(size=(100, 24)) as pilot:
        await until(pilot, lambda: sleeping_natively(log_text(pane)))
        assert len(children_named("strace")) == 1
        await pilot.press("q")
        await asyncio.to_thread(pane.finished.wait, 10)
        assert pane.result.outcome is Outcome.CANCELLED
        assert children_named("strace") == []
        assert ptrace.state_letter(p.pid) not in ("T", "t")
        assert ptrace.tracer_pid(p.pid) == 0


async def test_s_saves_the_output_and_says_where(tmp_path):
    lines = [f"line {i}" for i in range(50)] + ["HF_TOKEN=hf_" + "x" * 30]
    pane = ToolPane(
        "fake tool pid 7",
        lambda on_line, cancel: run_tool(
            [sys.executable, "-c", f"print({chr(10).join(lines)!r})"],
            timeout=30,
            on_line=on_line,
            cancel=cancel,
        ),
        save_dir=tmp_path,
    )
    said: list[str] = []
    pane.notify = lambda message, **_kw: said.append(message)  # type: ignore[method-assign]
    async with PaneApp(pane).run_test(size=(100, 24)) as pilot:
        await until(pilot, pane.finished.is_set)
        await pilot.pause(0.2)
        await pilot.press("s")
        await pilot.pause()
        (saved,) = list(tmp_path.iterdir())
        assert saved.name.startswith("gputui-fake-tool-pid-7-")
        text = saved.read_text()
        assert "line 0\n" in text and "line 49\n" in text
        assert "xxxxxxxx" not in text and "HF_TOKEN=<redacted>" in text  # redacted on screen too
        assert text.rstrip().endswith(f"done in {pane.result.elapsed_s:.2f} s")
        assert said == [f"saved to {saved.resolve()}"]


async def test_a_flood_of_lines_is_batched_not_lost():
    n = 20_000
    pane = ToolPane(
        "flood",
        lambda on_line, cancel: run_tool(
            [sys.executable, "-c", f"for i in range({n}): print(i)"],
            timeout=60,
            on_line=on_line,
            cancel=cancel,
        ),
    )
    async with PaneApp(pane).run_test(size=(100, 24)) as pilot:
        await until(pilot, pane.finished.is_set)
        await pilot.pause(0.3)
        assert len(pane.lines) == n and pane.lines[-1] == str(n - 1)
        assert str(n - 1) in log_text(pane)


@needs_py_spy
async def test_dump_all_pane_shows_groups_with_the_odd_one_marked(targets):
    roles = ["allreduce", "allreduce", "loader"]
    procs = []
    for rank, role in enumerate(roles):
        p = targets.start(role)
        procs.append(ProcessInfo(pid=p.pid, gpus=(rank,), rank=RankInfo(rank=rank)))
    snap = Snapshot(t=0.0, processes=tuple(procs))
    job = Job(key="k", label="test job (3 procs)", pids=tuple(p.pid for p in procs), gpus=(0, 1, 2))
    pane = dump_all_pane(job, snap)
    assert isinstance(pane, DumpAllPane)
    async with PaneApp(pane).run_test(size=(120, 40)) as pilot:
        await until(pilot, pane.finished.is_set)
        await pilot.pause(0.2)
        text = log_text(pane)
        assert "ranks 0,1 (2 processes)" in text
        assert "rank 2 (1 process)  <-- differs" in text
        assert "wait_for_the_data_loader" in text


async def test_a_recorded_process_is_refused_in_the_pane():
    pane = ToolPane(
        "py-spy 814",
        lambda on_line, cancel: py_spy_dump(
            ProcessInfo(pid=814, live=False), on_line=on_line, cancel=cancel
        ),
    )
    async with PaneApp(pane).run_test(size=(120, 24)) as pilot:
        await until(pilot, pane.finished.is_set)
        await pilot.pause(0.2)
        outcome = str(pane.query_one("#tool-outcome", Static).render())
        assert "process 814 is from a recording" in outcome
        assert pane.query_one("#tool-outcome").has_class("-bad")


def test_every_pane_binding_has_an_id_and_a_description():
    for b in ToolPane.BINDINGS:
        assert b.id and b.description  # type: ignore[union-attr]


async def test_quitting_the_app_with_a_pane_open_stops_the_tool():
    pane = ToolPane(
        "sleep",
        lambda on_line, cancel: run_tool(
            [sys.executable, "-c", "import time\nprint('up', flush=True)\ntime.sleep(60)"],
            timeout=60,
            on_line=on_line,
            cancel=cancel,
        ),
    )
    async with PaneApp(pane).run_test(size=(100, 24)) as pilot:
        await until(pilot, lambda: "up" in log_text(pane))
    assert await asyncio.to_thread(pane.finished.wait, 10)
    assert pane.result.outcome is Outcome.CANCELLED
