"""What the probe screens share: a modal screen that runs one long check in a thread worker.

Why one base: the pairwise probe (P) and the world probe (P with --probe-hosts) must behave
the same to a person: c or escape cancels a run, q or escape closes the screen once it is
done, closing (or quitting the app) never leaves the run going, and results come back from
the worker thread through `app.call_from_thread` without failing when the screen has gone.
A subclass says how its run is stopped and whether it is over; the layout (a title line, a
stage line, a scrolling body) is styled here once.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.css.query import NoMatches
from textual.screen import ModalScreen

from gputui.ui.widgets.safe_text import Static


class RunScreen(ModalScreen[None]):
    """A check running in a worker: subclasses implement `run_finished` and `stop_run`, and
    put `.run-title`, `.run-stage` and a VerticalScroll in a Vertical."""

    DEFAULT_CSS = """
    RunScreen { align: center middle; }
    RunScreen > Vertical { width: 95%; height: 90%; border: round $primary;
        background: $surface; }
    RunScreen .run-title { height: 1; padding: 0 1; text-style: bold;
        background: $primary-background; }
    RunScreen .run-stage { height: auto; padding: 0 1; }
    RunScreen VerticalScroll { height: 1fr; padding: 0 1; }
    """

    def run_finished(self) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def stop_run(self) -> None:  # pragma: no cover - abstract
        """Cancel the run; it may be over already (then nothing happens)."""
        raise NotImplementedError

    def _from_thread(self, fn: Callable[..., None], *args: object) -> None:
        """Run `fn` on the UI thread; a screen already closed (or an app quitting) is fine."""

        def guarded() -> None:
            try:
                fn(*args)
            except NoMatches:
                pass  # the screen was dismissed while the run finished

        try:
            self.app.call_from_thread(guarded)
        except RuntimeError:
            pass  # the app is closing; the run is being stopped anyway

    def action_cancel(self) -> None:
        if not self.run_finished():
            self.stop_run()
            self.query_one(".run-stage", Static).update("cancelling...")

    def action_cancel_or_close(self) -> None:
        if self.run_finished():
            self.dismiss(None)
        else:
            self.action_cancel()

    def action_close(self) -> None:
        if not self.run_finished():
            self.stop_run()
        self.dismiss(None)

    def on_unmount(self) -> None:
        if not self.run_finished():
            self.stop_run()  # closed or the app is quitting: leave nothing running
