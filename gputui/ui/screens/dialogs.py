"""Small dialogs that ask before gputui does something to a process (a signal, an strace of
pid 1 or of a kernel thread) or writes somewhere (a bundle: where, before it is written).
One key answers; escape cancels."""

from __future__ import annotations

import signal
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen

from gputui.ui.keys import SIGNALS, screen_bindings
from gputui.ui.widgets.safe_text import Static, Text

_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{ width: 64; max-width: 100%; height: auto; border: round $warning;
    background: $surface; padding: 0 1; }}
{name} Static {{ height: auto; }}
"""


class KillDialog(ModalScreen["signal.Signals | None"]):
    """Which signal to send to `pid`: one key per signal, escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = screen_bindings("kill")
    DEFAULT_CSS = _CSS.format(name="KillDialog")

    def __init__(self, pid: int, command: str) -> None:
        super().__init__()
        self.pid, self.command = pid, command

    def compose(self) -> ComposeResult:
        t = Text()
        t.append(f"Send a signal to pid {self.pid}?\n", style="bold")
        t.append(f"{self.command[:70]}\n\n", style="dim")
        for key, _sig, text in SIGNALS:
            t.append(f" {key} ", style="bold reverse").append(f" {text}\n")
        t.append("\n esc ", style="bold reverse").append(" cancel")
        with Vertical():
            yield Static(t)

    def action_choose(self, signum: int) -> None:
        self.dismiss(signal.Signals(signum))

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """A yes/no question: y confirms, anything in BINDINGS' cancel list refuses."""

    BINDINGS = screen_bindings("confirm")
    DEFAULT_CSS = _CSS.format(name="ConfirmDialog")

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        t = Text(self.question + "\n\n", style="bold")
        t.append(" y ", style="bold reverse").append(" yes   ")
        t.append(" n ", style="bold reverse").append(" no")
        with Vertical():
            yield Static(t)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class WriteDialog(ConfirmDialog):
    """Before gputui writes: the full path it will write to; enter or y writes, esc or n
    does not (nothing is written until then)."""

    BINDINGS = screen_bindings("write")
    DEFAULT_CSS = _CSS.format(name="WriteDialog").replace("width: 64;", "width: 100%;")

    def compose(self) -> ComposeResult:
        t = Text(self.question + "\n\n", style="bold")
        t.append(" enter ", style="bold reverse").append(" or ").append(" y ", style="bold reverse")
        t.append(" write   ").append(" esc ", style="bold reverse").append(" cancel")
        with Vertical():
            yield Static(t)
