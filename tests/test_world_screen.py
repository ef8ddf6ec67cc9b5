"""The world probe as a screen, driven through Textual's Pilot: two local "hosts" on gloo,
one with a killed rank; the screen shows the stages, then the host table and the finding."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

import pytest
from rich.console import Console
from textual.app import App
from textual.widgets import Static

from gputui.probe.runner import torch_installed
from gputui.probe.world.model import WorldOptions
from gputui.ui.screens.world import WorldScreen

pytestmark = pytest.mark.skipif(not torch_installed(), reason="torch is not installed")


class HostApp(App[None]):
    def __init__(self, screen: WorldScreen) -> None:
        super().__init__()
        self.world = screen

    def on_mount(self) -> None:
        self.push_screen(self.world)


async def until(pilot, cond: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await pilot.pause(0.05)


def shown(screen: WorldScreen, widget_id: str) -> str:
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(screen.query_one(widget_id, Static).content)
    return console.export_text()


async def test_the_screen_names_the_host_whose_rank_was_killed(monkeypatch):
    monkeypatch.setenv("GPUTUI_WORLD_FAULT", "h2:kill")
    opts = WorldOptions(launcher="local", host_timeout=20, port=_free_port())
    screen = WorldScreen(["h1", "h2"], opts)
    app = HostApp(screen)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: screen.finished)
        await pilot.pause()
        assert screen.error is None and screen.report is not None and not screen.report.ok
        assert screen.stages[0].startswith("world: 2 hosts") and "bisect" in screen.stages[1]
        assert "FAILED: see the findings" in shown(screen, "#world-stage")
        report = shown(screen, "#world-report")
        assert "host h2: rank 0 (CPU): killed by SIGKILL" in report
        assert "left running: none" in report
        await pilot.press("q")


def _free_port() -> int:
    from conftest import free_port

    return free_port()
