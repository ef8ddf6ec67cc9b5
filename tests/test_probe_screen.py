"""The probe screen driven through Textual's Pilot on simulated gloo devices: it shows
progress, then the colored matrix and where the JSON was saved; c cancels a running probe."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable

import psutil
import pytest
from rich.console import Console
from textual.app import App
from textual.widgets import Static

from gputui.probe.runner import torch_installed
from gputui.ui.screens.probe import ProbeScreen

pytestmark = pytest.mark.skipif(not torch_installed(), reason="torch is not installed")


class HostApp(App[None]):
    """The smallest host: a base screen with the probe screen pushed on top, as key P does."""

    def __init__(self, screen: ProbeScreen) -> None:
        super().__init__()
        self.probe = screen

    def on_mount(self) -> None:
        self.push_screen(self.probe)


async def until(pilot, cond: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await pilot.pause(0.05)


def shown(screen: ProbeScreen, widget_id: str) -> str:
    """The text a Static shows (tables rendered as a terminal would)."""
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(screen.query_one(widget_id, Static).content)
    return console.export_text()


async def test_the_probe_runs_shows_the_matrix_and_saves_json(tmp_path):
    screen = ProbeScreen(backend="gloo", cpu=3, save_dir=tmp_path)
    app = HostApp(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, screen.finished.is_set)
        await pilot.pause()
        assert screen.error is None and screen.report is not None and screen.report.ok
        matrix = shown(screen, "#probe-matrix")
        assert "dev0" in matrix and "dev2" in matrix and "FAIL" not in matrix
        assert "all pairs passed" in shown(screen, "#probe-progress")
        assert "slowest link" in shown(screen, "#probe-worst")
        assert screen.saved_path is not None and screen.saved_path.parent == tmp_path
        assert f"saved to {screen.saved_path}" in shown(screen, "#probe-saved")
        data = json.loads(screen.saved_path.read_text())
        assert data["ok"] is True and len(data["allreduce"]) == 3
        await pilot.press("q")
        await until(pilot, lambda: app.screen is not screen)


async def test_c_cancels_a_hung_probe_and_leaves_no_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTUI_PROBE_FAULT", "hang:0-1")
    screen = ProbeScreen(backend="gloo", cpu=2, timeout=120, save_dir=tmp_path)
    app = HostApp(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: screen.progress is not None and bool(screen.progress.running))
        assert "running: 0-1" in shown(screen, "#probe-progress")
        t0 = time.monotonic()
        await pilot.press("c")
        await until(pilot, screen.finished.is_set)
        assert time.monotonic() - t0 < 10
        assert screen.report is not None and screen.report.cancelled
        assert screen.report.pairs[0].reason == "cancelled"
        assert "cancelled" in shown(screen, "#probe-progress")
        assert "FAIL" in shown(screen, "#probe-matrix")
    kids = [
        c
        for c in psutil.Process().children(recursive=True)
        if c.is_running()
        and c.status() != psutil.STATUS_ZOMBIE
        and "gputui.probe.worker" in " ".join(c.cmdline())
    ]
    assert kids == []


async def test_bad_options_show_a_message_instead_of_a_crash(tmp_path):
    screen = ProbeScreen(backend="gloo", cpu=2, gpus=[0, 5], save_dir=tmp_path)
    app = HostApp(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, screen.finished.is_set)
        await pilot.pause()
        assert "probe did not run: no such device" in shown(screen, "#probe-progress")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is not screen)
