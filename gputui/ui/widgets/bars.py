"""The top status line and the bottom key bar (which doubles as the filter prompt).

The status line changes only when a sample arrives or when the data turns stale: it shows
the sample's clock time, not a seconds-ago counter, so an idle dashboard draws one frame a
second (the sample) rather than two (the sample, then the age). The key bar replaces
Textual's Footer: one pre-built line, the keys htop and nvitop users look for first (the key
table's offers, gputui.ui.keys.KEY_HINTS).
"""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.message import Message
from textual.strip import Strip

from gputui.ui.keys import KEY_HINTS
from gputui.ui.widgets.strips import Line, LineView, fit

STATUS_STYLE = "@status"
STALE_STYLE = "@hung"
KEYBAR_STYLE = "@keybar"
KEY_STYLE = "@key"


class StatusLine(LineView):
    DEFAULT_CSS = "StatusLine { height: 1; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.left = "gputui"
        self.right = ""
        self.stale = False
        self.shorter: tuple[str, ...] = ()

    def show(
        self, left: str, right: str = "", stale: bool = False, shorter: tuple[str, ...] = ()
    ) -> None:
        """`shorter`: shorter forms of `left`, longest first, for a narrow terminal (the
        first that fits is shown, rather than `left` cut in the middle of a word)."""
        if (left, right, stale, shorter) != (self.left, self.right, self.stale, self.shorter):
            self.left, self.right, self.stale, self.shorter = left, right, stale, shorter
            self.redraw()

    def build(self, width: int) -> list[Strip]:
        right = f" {self.right} " if self.right else ""
        spec = STALE_STYLE if self.stale else STATUS_STYLE
        room = max(0, width - cell_len(right))
        left = next((t for t in (self.left, *self.shorter) if cell_len(t) + 1 <= room), None)
        left = left if left is not None else (self.shorter or (self.left,))[-1]
        line = Line().add(fit(f" {left}", room), STATUS_STYLE)
        line.add(right, spec)
        return [line.strip(width, STATUS_STYLE)]


class FilterChanged(Message):
    """The filter prompt was applied (enter) or cleared (escape)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class KeyBar(LineView, can_focus=True):
    """Key hints; while focused it is the filter prompt: type, enter applies, escape clears."""

    # Docked: at 40x12 the demo's stall (story, banner, GPUs, a table of min-height 3) pushed
    # the key bar below the screen; the keys are what a person needs at a small terminal.
    DEFAULT_CSS = "KeyBar { height: 1; dock: bottom; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.editing = False
        self.text = ""
        self.note = ""  # a short message shown at the left (e.g. "sorted by CPU%")
        self.hidden: frozenset[str] = frozenset()  # keys with nothing to act on now
        self.first: tuple[tuple[str, str], ...] = ()  # keys only this moment has, shown first

    def build(self, width: int) -> list[Strip]:
        line = Line()
        if self.editing:
            line.add(" filter: ", KEY_STYLE).add(self.text + "█", KEYBAR_STYLE)
            line.add("   enter apply · esc clear", KEYBAR_STYLE)
            return [line.strip(width, KEYBAR_STYLE)]
        if self.note:
            line.add(f" {self.note} ", "@notice")
        for key, what in (*self.first, *KEY_HINTS):
            if key in self.hidden:
                continue
            if line.length + cell_len(key) + cell_len(what) + 2 > width:
                break
            line.add(f" {key}", KEY_STYLE).add(f" {what}", KEYBAR_STYLE)
        return [line.strip(width, KEYBAR_STYLE)]

    def offer_first(self, hints: tuple[tuple[str, str], ...]) -> None:
        """Keys that only make sense now (B while a GPU is blamed), before the usual ones."""
        if hints != self.first:
            self.first = hints
            self.redraw()

    def start(self, text: str) -> None:
        self.editing, self.text = True, text
        self.focus()
        self.redraw()

    def offer(self, hidden: frozenset[str]) -> None:
        """Leave out the keys in `hidden` (gputui.ui.key_offers: nothing to act on now)."""
        if hidden != self.hidden:
            self.hidden = hidden
            self.redraw()

    def set_note(self, note: str) -> None:
        if note != self.note:
            self.note = note
            self.redraw()

    def on_key(self, event: events.Key) -> None:
        if not self.editing:
            return
        event.stop()
        event.prevent_default()
        if event.key == "enter":
            self._finish(self.text)
        elif event.key == "escape":
            self._finish("")
        elif event.key in ("backspace", "ctrl+h"):
            self.text = self.text[:-1]
            self.redraw()
        elif event.character and event.is_printable:
            self.text = fit(self.text + event.character, 60).rstrip()
            self.redraw()

    def on_blur(self) -> None:
        if self.editing:
            self._finish(self.text)

    def _finish(self, text: str) -> None:
        self.editing = False
        self.text = text
        self.redraw()
        self.post_message(FilterChanged(text))
