"""The dashboard's messages: one at a time, never over a pane, dismissed by esc.

In a replay, `k` pressed three times stacked three identical refusals, esc did not clear them,
and one covered the `d` pane opened after it. Textual keeps every notice until its timeout;
here a new one replaces the old, a pane opens on a clean screen, and esc dismisses.
"""

from __future__ import annotations

from typing import Any


class OneMessage:
    """Mixin for GputuiApp (before textual's App in its bases)."""

    def notify(  # type: ignore[no-untyped-def]
        self, message: str, *, title: str = "", severity: Any = "information", **kw: Any
    ) -> None:
        """A new message replaces the one on screen."""
        self.clear_notifications()  # type: ignore[attr-defined]
        super().notify(message, title=title, severity=severity, **kw)  # type: ignore[misc]

    def push_screen(self, *args: Any, **kw: Any) -> Any:
        """A pane opens on a clean screen: a message left from before must not cover it."""
        self.clear_notifications()  # type: ignore[attr-defined]
        return super().push_screen(*args, **kw)  # type: ignore[misc]

    def action_clear_filter(self) -> None:
        """esc: dismiss the message on screen, and clear the filter."""
        self.clear_notifications()  # type: ignore[attr-defined]
        super().action_clear_filter()  # type: ignore[misc]
