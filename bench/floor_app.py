"""The floor: the least a Textual dashboard can cost, to put gputui's figures in proportion.

A bare Textual app with one line-based widget that repaints one line a second (a power
figure and a clock, as a dashboard's sample would), no sampler, no table. gputui's CPU,
first frame and RSS next to this app's, measured in the same run, show how much of gputui's
cost is Textual's own (importing it, its event loop, a frame a second) and how much is
gputui's.

    python bench/floor_app.py            # q quits
"""

from __future__ import annotations

import time

from rich.segment import Segment
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


class OneLine(Widget):
    DEFAULT_CSS = "OneLine { height: 1; }"

    def __init__(self) -> None:
        super().__init__()
        self.strip = Strip([])
        self.n = 0

    def on_mount(self) -> None:
        self.tick()
        self.set_interval(1.0, self.tick)

    def tick(self) -> None:
        self.n += 1
        text = f" GPU 0 H200  {120 + self.n % 7}/700W  sample {time.strftime('%H:%M:%S')}"
        self.strip = Strip([Segment(text.ljust(self.size.width or len(text)))])
        self.refresh(Region(0, 0, self.size.width, 1))

    def render_line(self, y: int) -> Strip:
        return self.strip if y == 0 else Strip.blank(self.size.width)


class FloorApp(App[None]):
    BINDINGS = [("q", "quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield OneLine()


if __name__ == "__main__":
    FloorApp().run()
