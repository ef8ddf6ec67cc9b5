"""`C`: every GPU's clocks and the reasons NVML gives for holding them down, from the sample
on screen (never NVML itself), at 80x24, following the dashboard as new samples come."""

from __future__ import annotations

import threading
from dataclasses import replace

from screen import on_screen, screen_text, until

from gputui.collect.model import GpuSample, Snapshot
from gputui.collect.source import ReplaySource
from gputui.diagnose.slow.clocks import HW_SLOWDOWN, SW_POWER_CAP
from gputui.ui.app import GputuiApp
from gputui.ui.screens.clocks import ClocksScreen, clocks_text


def demo_at_stall() -> ReplaySource:
    """The demo up to its stall (both GPUs at 1980 MHz, no reason holds them down)."""
    src = ReplaySource.demo(realtime=False)
    t0 = src.snaps[0].t
    src.snaps = [s for s in src.snaps if s.t - t0 <= 80.0]
    return src


async def test_c_shows_each_gpus_clocks_and_reasons_at_80x24_and_esc_closes():
    app = GputuiApp(demo_at_stall())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.ended)
        await pilot.press("C")
        assert isinstance(app.screen, ClocksScreen)
        lines = screen_text(app)
        assert any("clocks and why they are held down" in ln for ln in lines), lines
        for gpu in (0, 1):
            row = next((ln for ln in lines if ln.strip(" │").startswith(f"{gpu}  1980 MHz")), "")
            assert "P0" in row and "/700 W" in row and "none" in row, lines
        await pilot.press("escape")
        assert not isinstance(app.screen, ClocksScreen)


class TwoSamples:
    """A live-kind source: one sample until `turn` is set, then another (as a GPU that
    starts to be held down by the hardware while the pane is open)."""

    kind, description = "nvml", "two samples"

    def __init__(self, first: Snapshot, then: Snapshot) -> None:
        self.first, self.then, self.turn = first, then, threading.Event()

    def sample(self) -> Snapshot:
        return self.then if self.turn.is_set() else self.first

    def next_delay(self) -> float:
        return 0.05

    def close(self) -> None:
        pass


def with_events(snap: Snapshot, events: int) -> Snapshot:
    return replace(snap, gpus=tuple(replace(g, events=events) for g in snap.gpus))


async def test_the_pane_follows_the_samples_while_it_is_open(demo_snaps):
    quiet = demo_snaps[0]
    source = TwoSamples(
        with_events(quiet, SW_POWER_CAP), with_events(quiet, SW_POWER_CAP | HW_SLOWDOWN)
    )
    app = GputuiApp(source)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.snapshot is not None)
        await pilot.press("C")
        await until(pilot, lambda: on_screen(app, "power cap"), why=screen_text(app))
        assert not on_screen(app, "HW slowdown")
        source.turn.set()
        await until(pilot, lambda: on_screen(app, "power cap, HW slowdown"), why=screen_text(app))


def test_the_hardwares_reasons_stand_out_and_what_is_missing_is_said():
    snap = Snapshot(
        t=0.0,
        gpus=(
            GpuSample(index=0, sm_mhz=1980, events=0, pstate=0, temp_c=40),
            GpuSample(index=1, sm_mhz=1200, events=HW_SLOWDOWN, power_w=650, power_limit_w=700),
            GpuSample(index=2, sm_mhz=1980),
            GpuSample(index=3, na={"gpu": "GPU is lost"}),
        ),
    )
    text = clocks_text(snap)
    lines = text.plain.splitlines()
    assert lines[1].split()[:3] == ["0", "1980", "MHz"] and lines[1].endswith("none")
    assert "650/700 W" in lines[2] and lines[2].endswith("HW slowdown")
    assert lines[3].endswith("not reported")
    assert lines[4].strip() == "3  no reading: GPU is lost"
    hw = text.plain.index("HW slowdown")
    assert any(s.start <= hw < s.end and s.style for s in text.spans), "in the alert colour"
    assert clocks_text(replace(snap, gpus=())).plain.startswith("No GPUs on this node")
