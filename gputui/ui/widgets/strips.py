"""Line-based drawing: build one terminal line at a time, repaint only the lines that changed.

Why not Static/DataTable: a dashboard that redraws every second spent most of its CPU in
Textual's generic rendering (Rich Text -> segments -> styled strips, a layout pass per
update, and DataTable repainting whole when two rows change). Here each widget builds its
lines as `Strip`s from pre-made styles, compares them with what is on screen, and asks
Textual to repaint only the lines that differ (`refresh(Region)`); a layout pass happens only
when a widget's number of lines changes. Textual's Line API then calls `render_line(y)` for
the dirty lines alone.

Every string becomes a Segment in `Line.add` (and is measured in `fit`), and both pass it
through textsafe.clean: a control character from a recording or a command line is drawn as
a visible escape, never sent to the terminal (gputui.ui.widgets.safe_text does the same for the
panes built from Rich Text and Static).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from gputui.textsafe import clean
from gputui.ui.widgets.palette import role


def style(spec: str) -> Style:
    """The style of a spec: "@role" (gputui.ui.widgets.palette: a colour of the theme, with any
    emphasis after it) or plain emphasis ("bold", "dim italic"). Made once per spec (and
    theme): `Style.parse` is what a naive renderer pays for on every cell of every frame."""
    return role(spec)


def fit(text: str, width: int, align: str = "<") -> str:
    """`text` cut or padded to exactly `width` cells (an ellipsis marks a cut), cleaned
    first (a control character counts no cells but its escape does)."""
    if width <= 0:
        return ""
    text = clean(text)
    n = cell_len(text)
    if n > width:
        if width == 1:
            return "…"
        out, used = [], 0
        for ch in text:
            w = cell_len(ch)
            if used + w > width - 1:
                break
            out.append(ch)
            used += w
        return "".join(out) + "…" + " " * (width - 1 - used)
    pad = " " * (width - n)
    return text + pad if align == "<" else pad + text


class Line:
    """Segments for one terminal line, built left to right, then cut/padded to a width."""

    __slots__ = ("segments", "length")

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.length = 0

    def add(self, text: str, spec: str = "") -> Line:
        """Add `text`, cleaned: every string the line views draw passes here, so no control
        character from a recording, a command line or a tool reaches the terminal."""
        if text:
            text = clean(text)
            self.segments.append(Segment(text, style(spec) if spec else None))
            self.length += cell_len(text)
        return self

    def cell(self, text: str, width: int, spec: str = "", align: str = "<") -> Line:
        """A fixed-width cell: `text` fitted to `width` columns."""
        return self.add(fit(text, width, align), spec)

    def pad_to(self, width: int, spec: str = "") -> Line:
        if self.length < width:
            self.add(" " * (width - self.length), spec)
        return self

    def strip(self, width: int, fill: str = "") -> Strip:
        """The line as a Strip of exactly `width` cells."""
        s = Strip(self.segments, self.length)
        if self.length > width:  # cut at the right edge: "…" says so (a column, a bar)
            if width <= 0:
                return Strip([], 0)
            kept = s.crop(0, width - 1)
            segs = list(kept)
            mark = Segment("…", segs[-1].style if segs else None)
            return Strip([*segs, mark], width)
        if self.length < width:
            s = Strip([*self.segments, Segment(" " * (width - self.length), style(fill))], width)
        return s


def spaces(n: int, spec: str = "") -> Segment:
    """`n` blank cells (padding between and after panels): nothing from outside in it."""
    return Segment(" " * max(0, n), style(spec) if spec else None)


def text_line(text: str, width: int, spec: str = "") -> Strip:
    return Line().add(text, spec).strip(width, spec)


class LineView(Widget):
    """A widget that shows a list of Strips and repaints only the lines that changed.

    Subclasses compute their lines in `build(width)` from their own data and call
    `redraw()` when the data changed. Height is the number of lines (CSS `height: auto`).
    """

    DEFAULT_CSS = "LineView { height: auto; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._strips: list[Strip] = []
        self._built_width = -1
        # Per line: (the line as built, the same on the theme's colours), from the last
        # redraw: a line built again the same is not styled again (see `_themed`)
        self._on_theme: list[tuple[Strip, Strip]] = []
        self._on_theme_base: Style | None = None

    def build(self, width: int) -> list[Strip]:  # pragma: no cover - abstract
        raise NotImplementedError

    def redraw(self) -> None:
        """Rebuild the lines and repaint those that differ from what is on screen."""
        width = self.size.width
        if width <= 0:  # not laid out yet: on_resize draws once it is
            return
        new = self._themed(self.build(width))
        old, self._strips = self._strips, new
        self._built_width = width
        repaint_changed(self, old, new, width, layout=True)

    def _themed(self, strips: list[Strip]) -> list[Strip]:
        """The lines on the theme's background and text colour (the widget's CSS style),
        under the colours of their own spans: plain text is the theme's, not the terminal's.

        A line that reads as the line at its place did last time (the very object, when a
        subclass keeps what did not change, as the GPU board does; else an equal one) gets
        the same styled object back: a sample that changes two lines of ten styles two, and
        `repaint_changed` skips the others by identity."""
        base = self.rich_style
        if not base:
            return strips
        last = self._on_theme if base == self._on_theme_base else []
        out: list[tuple[Strip, Strip]] = []
        for i, s in enumerate(strips):
            was = last[i] if i < len(last) else None
            if was is not None and (was[0] is s or was[0] == s):
                out.append(was)
            else:
                out.append((s, s.apply_style(base)))
        self._on_theme, self._on_theme_base = out, base
        return [themed for _, themed in out]

    def on_resize(self) -> None:
        if self.size.width != self._built_width:
            self.redraw()
            self.refresh()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if width != self._built_width and width > 0:
            self._strips = self._themed(self.build(width))
            self._built_width = width
        return len(self._strips)

    def render_line(self, y: int) -> Strip:
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, self.rich_style)

    @property
    def lines_text(self) -> list[str]:
        """The plain text of the lines (tests, and `screen_text` helpers)."""
        return [s.text for s in self._strips]


def repaint_changed(
    widget: Widget, old: Sequence[Strip], new: Sequence[Strip], width: int, layout: bool
) -> None:
    """Ask Textual to repaint only the lines of `widget` that differ between `old` and `new`;
    a change in the number of lines repaints it all (with a layout pass when `layout`)."""
    if len(new) != len(old):
        widget.refresh(layout=layout)
        return
    dirty = [
        Region(0, y, width, 1)
        for y, (a, b) in enumerate(zip(old, new, strict=True))
        if a is not b and a != b
    ]
    if dirty:
        widget.refresh(*dirty)
