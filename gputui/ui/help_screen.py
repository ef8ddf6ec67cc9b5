"""The help screen, generated from the app's bindings so it can never drift from them.

It is at most 78 columns wide, so it fits an 80-column terminal (a split tmux pane, a
default ssh window) with its border, and scrolls when the terminal is short.
"""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from gputui.ui.safe_text import Static, Text

TABLE_KEYS = (
    ("up/down, PgUp/PgDn", "move in the process table"),
    ("Home/End", "first / last process"),
    ("click a header", "sort by it; again: reverse"),
    ("ctrl+p", "command palette: every action by name"),
)
NOTES = (
    "Marks: SUSP = the rank the hang detector names (not spinning while its peers spin "
    "in a collective); wait = a rank spinning in a collective.\n"
    "GPU history bars: height = util, colour = power (the warning colour, yellow by "
    "default: idle power, so a full bar of it is a kernel spinning in a wait; the success "
    "colour, green by default: arithmetic).\n"
    "Data older than 3 sample intervals is shown as STALE."
)


def keys_table(bindings: list[Binding]) -> Table:
    table = Table(box=None, show_header=True, header_style="bold", padding=(0, 1))
    table.add_column("key", no_wrap=True)
    table.add_column("does")
    for b in bindings:
        keys = ", ".join(k.strip() for k in (b.key_display or b.key).split(","))
        table.add_row(_pretty(keys), b.description)
    for key, text in TABLE_KEYS:
        table.add_row(key, text)
    return table


def _pretty(keys: str) -> str:
    names = {"question_mark": "?", "slash": "/", "space": "space", "escape": "esc"}
    return ", ".join(names.get(k, k) for k in keys.split(", "))


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark,f1,h", "dismiss", "Close help", id="help.close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 78; max-width: 100%; height: auto;
        max-height: 100%; border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, bindings: list[Binding]) -> None:
        super().__init__()
        self.bindings_list = bindings

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("gputui keys  (esc closes; scroll for more)", style="bold"))
            yield Static(keys_table(self.bindings_list))
            yield Static(Text(NOTES, style="dim"))

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
