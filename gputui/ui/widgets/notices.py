"""The dashboard's messages: one at a time, never over a pane, dismissed by esc.

In a replay, `k` pressed three times stacked three identical refusals, esc did not clear them,
and one covered the `d` pane opened after it. Textual keeps every notice until its timeout;
here a new one replaces the old, a pane opens on a clean screen, and esc dismisses. Every
message passes textsafe.clean, as every other string the dashboard draws.
"""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.notifications import SeverityLevel

from gputui.textsafe import clean


class OneMessage(App[None]):
    """Mixin for GputuiApp, before textual's App in its bases (it is an App, so that its
    overrides are checked against textual's). esc's part is TableActions.action_clear_filter."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A new message replaces the one on screen. Messages quote paths, errors and
        what a recording said: they are cleaned (textsafe) and shown without markup."""
        self.clear_notifications()
        super().notify(
            clean(message, keep_newlines=True),
            title=clean(title),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )

    def push_screen(self, *args: Any, **kw: Any) -> Any:
        """A pane opens on a clean screen: a message left from before must not cover it."""
        self.clear_notifications()
        return super().push_screen(*args, **kw)
