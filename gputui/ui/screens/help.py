"""The help screen, generated from the key table (gputui.ui.keys) so it can never drift from
the app's bindings.

It fits an 80 x 24 terminal (a split tmux pane, a default ssh window) whole, with its
border: the keys in two columns of short labels (the command palette, ctrl+p, keeps the long
descriptions), then the notes. One column of the bindings' descriptions took 40 rows and had
to be scrolled at 24. In the guided demo, space goes on from the stop the demo holds at (and
pauses elsewhere): the help says so there.
"""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from gputui.ui.keys import DEMO_LABELS, LABELS, TABLE_KEYS, screen_bindings
from gputui.ui.widgets.safe_text import Static, Text

# The help's words for each binding (by its id) are the key table's labels
# (gputui.ui.keys), at most LABEL_WIDTH cells: tests/test_app.py holds every binding to one.
__all__ = ["LABELS", "LABEL_WIDTH", "TABLE_KEYS", "HelpScreen", "help_rows", "keys_table"]
LABEL_WIDTH = 26
NOTES = (
    "SUSP: the rank the hang detector names (idle while its peers spin in a collective); "
    "wait: a rank spinning in one. GPU history bars: height = util, colour = power (the "
    "warning colour: idle power, a kernel spinning in a wait; the success colour: "
    "arithmetic). STALE: no sample for 3 sample intervals."
)


def _pretty(keys: str) -> str:
    names = {"question_mark": "?", "slash": "/", "space": "space", "escape": "esc"}
    return ", ".join(names.get(k, k) for k in keys.split(", "))


def help_rows(bindings: list[Binding], demo: bool = False) -> list[tuple[str, str]]:
    """(keys, label) for every binding, then the table's own keys."""
    labels = {**LABELS, **(DEMO_LABELS if demo else {})}
    rows = []
    for b in bindings:
        keys = ", ".join(k.strip() for k in (b.key_display or b.key).split(","))
        rows.append((_pretty(keys), labels.get(b.id or "", b.description)))
    return [*rows, *TABLE_KEYS]


KEY_WIDTH = 9
SCROLLBAR = 2
TWO_COLUMNS = 2 * (KEY_WIDTH + 1 + LABEL_WIDTH) + 1  # the room two halves need side by side


def keys_table(bindings: list[Binding], demo: bool = False, room: int | None = None) -> Table:
    """Two columns of (key, label), the first half of the rows on the left; where `room`
    (cells) is too narrow for two, one column whose labels end in "…": the keys always show
    (at 40 columns two halves squeezed the keys out of sight)."""
    rows = help_rows(bindings, demo)
    table = Table(box=None, show_header=False, padding=(0, 1, 0, 0), pad_edge=False)
    if room is not None and room < TWO_COLUMNS:
        label = max(8, room - KEY_WIDTH - 1 - SCROLLBAR)  # one column scrolls: its bar too
        table.add_column(no_wrap=True, style="bold", min_width=KEY_WIDTH)
        table.add_column(no_wrap=True, overflow="ellipsis", width=label)
        for row in rows:
            table.add_row(*row)
        return table
    half = (len(rows) + 1) // 2
    for gap in (1, 0):  # a space between the two halves
        table.add_column(no_wrap=True, style="bold", min_width=KEY_WIDTH)
        table.add_column(no_wrap=True, width=LABEL_WIDTH + gap)
    for i in range(half):
        right = rows[i + half] if i + half < len(rows) else ("", "")
        table.add_row(*rows[i], *right)
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = screen_bindings("help")
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 78; max-width: 100%; height: auto;
        max-height: 100%; border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, bindings: list[Binding], demo: bool = False) -> None:
        super().__init__()
        self.bindings_list = bindings
        self.demo = demo

    def _room(self) -> int:
        """Cells inside the border and padding, at the terminal's width now."""
        return min(78, self.app.size.width) - 4

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("gputui keys  (esc closes)", style="bold"))
            yield Static(keys_table(self.bindings_list, self.demo, self._room()), id="help-keys")
            yield Static(Text(NOTES, style="dim"))

    def on_resize(self) -> None:
        self.query_one("#help-keys", Static).update(
            keys_table(self.bindings_list, self.demo, self._room())
        )

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
