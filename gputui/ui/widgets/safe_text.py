"""The only ways text reaches the dashboard's screen, each through textsafe.clean.

Rich and Textual strip a few control characters (bell, backspace, carriage return) but pass
ESC and the C1 controls: a recording whose job key held `ESC ] 2 ; ... BEL` renamed the
terminal, and one holding OSC 52 wrote the clipboard. Cleaning each string where it is
made into something drawable closes that class rather than one field at a time: the
dashboard's widgets take their text from here (or from `gputui.ui.widgets.strips`, whose `Line`
cleans every segment), and tests/test_ui_escapes.py fails on any module of gputui/ui that
imports Rich's `Text`, Textual's `Static` or builds a `Segment` itself.

Multi-line bodies (a details screen, a stack) keep their line breaks; every other control
character becomes a visible escape (`\\x1b`). Strings given to `Static` are shown as they
are (markup off unless asked for), so a `[` in a path or an error is not taken for markup.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text as RichText
from textual.widgets import Static as TextualStatic

from gputui.textsafe import clean


def _clean(text: str) -> str:
    return clean(text, keep_newlines=True, keep_tabs=True)


class Text(RichText):
    """Rich's Text, with every string cleaned as it is added."""

    def __init__(self, text: str = "", style: str | Style = "", **kw: Any) -> None:
        super().__init__(_clean(text), style, **kw)

    def append(self, text: str | RichText, style: str | Style | None = None) -> Text:
        if isinstance(text, str):
            text = _clean(text)
        elif not isinstance(text, Text):  # someone else's Text: its plain text, cleaned
            text = Text(text.plain, text.style)
        super().append(text, style)
        return self


class Static(TextualStatic):
    """Textual's Static, whose strings are cleaned and shown without markup."""

    def __init__(self, content: Any = "", *, markup: bool = False, **kw: Any) -> None:
        super().__init__(_safe(content), markup=markup, **kw)

    def update(self, content: Any = "", *, layout: bool = True) -> None:
        super().update(_safe(content), layout=layout)


def _safe(content: Any) -> Any:
    """A string cleaned; a Rich Text not made here rebuilt from its cleaned plain text;
    other renderables (a Table of such Text) as they are."""
    if isinstance(content, str):
        return _clean(content)
    if isinstance(content, RichText) and not isinstance(content, Text):
        return Text(content.plain, content.style)
    return content
