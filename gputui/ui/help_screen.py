"""The help screen, generated from the app's bindings so it can never drift from them."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

TABLE_KEYS = (("up/down, pgup/pgdn", "move in the process table"),)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "dismiss", "Close help", id="help.close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 1 2; }
    """

    def __init__(self, bindings: list[Binding], notes: str) -> None:
        super().__init__()
        self.bindings_list = bindings
        self.notes = notes

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=True, header_style="bold")
        table.add_column("key")
        table.add_column("does")
        for b in self.bindings_list:
            table.add_row(b.key_display or b.key, b.description)
        for key, text in TABLE_KEYS:
            table.add_row(key, text)
        with VerticalScroll():
            yield Static("[b]gputui keys[/b]  (escape closes)\n")
            yield Static(table)
            yield Static("\n" + self.notes)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
