"""A widget that shows one rich Text and repaints only when that text changes.

Static.update() always asks for a new layout of the whole screen, which on a dashboard that
redraws every second is most of the app's idle CPU. Here an unchanged text costs nothing,
and a changed one asks for a layout only when its number of lines changed (the widgets are
`height: auto`, and the line count is all that decides their height).
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget


class TextView(Widget):
    """Holds a Text; `set_text` repaints it, re-laying out only when its height changes."""

    def __init__(self, text: Text | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._text = text or Text()
        self._lines = self._text.plain.count("\n")

    @property
    def text(self) -> Text:
        return self._text

    def render(self) -> Text:
        return self._text

    def set_text(self, text: Text) -> bool:
        """Show `text`; False (and no repaint) when it is what is shown already."""
        if text == self._text:
            return False
        lines = text.plain.count("\n")
        self._text = text
        self.refresh(layout=lines != self._lines)
        self._lines = lines
        return True
