"""What a person would read on the terminal: the app's composed screen as plain text lines."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from textual.app import App


def screen_text(app: App) -> list[str]:
    """Every line of the screen as the compositor draws it (modal screens included)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def on_screen(app: App, needle: str) -> bool:
    return any(needle in line for line in screen_text(app))


async def until(pilot, cond: Callable[[], bool], timeout: float = 20.0, why: object = None) -> None:
    """Let the app run until `cond()` holds; fail after `timeout` seconds, showing `why`
    (what the test watched) so a failure says what was seen instead."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"condition not met in time; seen: {why!r}"
        await pilot.pause(0.05)


async def run_to_end(app, pilot) -> None:
    """Wait until a replay has been played to its last sample and drawn."""
    await asyncio.wait_for(app.ended_event.wait(), 60)
    await pilot.pause()
    await pilot.pause()  # a line-count change asks for a layout pass: let it happen


class Answering:
    """A live-kind source that answers every sample at once with the same snapshot (a
    healthy NVML), asked again every `delay` seconds: a live view without a GPU."""

    kind, description = "nvml", "answering"

    def __init__(self, snap, delay: float = 0.05) -> None:
        self.snap, self.delay = snap, delay

    def sample(self):
        return self.snap

    def next_delay(self) -> float:
        return self.delay

    def close(self) -> None:
        pass
