"""The world probe as a screen: the stage while it runs, then the host table, the host-pair
matrix and the findings, failures in the alert colour.

It runs `check_world` (the same check as `gputui probe --hosts`) in a thread worker; stages
come back through `app.call_from_thread`. c or escape cancels a run (every launch in flight is
killed, and the workers on the hosts see their stdin close and kill their ranks); q or escape
closes the screen once it is done. The answer is the CLI's text, so both read the same.
"""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Footer

from gputui.probe.world.launch import STOP
from gputui.probe.world.model import WorldOptions
from gputui.probe.world.report import WorldReport, text
from gputui.ui.keys import screen_bindings
from gputui.ui.screens.run import RunScreen
from gputui.ui.widgets.palette import role
from gputui.ui.widgets.safe_text import Static, Text

_BAD = r"\bFAIL(ED)?\b|\bpeer failed\b|^findings:|not checked on .*"
_GOOD = r"\bok\b"


def colored(report_text: str) -> Text:
    """The report, failures in the alert colour and passes in the good one (the words, not
    the lines: easy to scan)."""
    t = Text(report_text)
    t.highlight_regex(_BAD, role("@alert"))
    t.highlight_regex(_GOOD, role("@good"))
    return t


class WorldScreen(RunScreen):
    """Runs the world probe over `hosts` inside the app."""

    BINDINGS = screen_bindings("run", "world")

    def __init__(
        self, hosts: list[str], opts: WorldOptions, *, bisect: bool = False, title: str = ""
    ) -> None:
        super().__init__()
        self.title_text = title or f"World probe: {len(hosts)} hosts"
        self.hosts = list(hosts)
        self.opts = opts
        self.bisect = bisect
        self.report: WorldReport | None = None
        self.error: str | None = None
        self.stages: list[str] = []
        self.finished = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, id="world-title", classes="run-title", markup=False)
            yield Static(
                "starting...  (c or escape cancels)",
                id="world-stage",
                classes="run-stage",
                markup=False,
            )
            with VerticalScroll():
                yield Static("", id="world-report")
        yield Footer()

    def on_mount(self) -> None:
        self._run()

    @work(thread=True, exclusive=True, exit_on_error=False, group="world")
    def _run(self) -> None:
        from gputui.probe.world.check import check_world

        STOP.clear()
        try:
            rep = check_world(self.hosts, self.opts, bisect=self.bisect, on_stage=self._stage)
            self.report = rep
            self._from_thread(self._show, rep)
        except Exception as e:  # a bug: a message in the screen, not a crash
            self.error = f"{type(e).__name__}: {e}"
            self._from_thread(self._show_error, self.error)
        finally:
            self.finished = True

    def _stage(self, what: str) -> None:
        self.stages.append(what)
        self._from_thread(self._show_stage, what)

    def _show_stage(self, what: str) -> None:
        self.query_one("#world-stage", Static).update(f"{what}...  (c or escape cancels)")

    def _show(self, rep: WorldReport) -> None:
        verdict = "all hosts and links passed" if rep.ok else "FAILED: see the findings"
        if STOP.is_set():
            verdict = "cancelled"
        self.query_one("#world-stage", Static).update(
            f"done in {rep.wall_s:.1f} s: {verdict}  (q or escape closes)"
        )
        self.query_one("#world-report", Static).update(colored(text(rep)))

    def _show_error(self, message: str) -> None:
        self.query_one("#world-stage", Static).update(
            f"world probe did not run: {message}  (q or escape closes)"
        )

    def run_finished(self) -> bool:
        return self.finished

    def stop_run(self) -> None:
        STOP.set()  # every launch in flight is killed; the hosts' workers kill their ranks


def open_world(app: Any, hosts: list[str], *, bisect: bool = False, title: str = "") -> None:
    """Push the world screen over `hosts`, reached with the dashboard's --probe-launcher
    (P with --probe-hosts; B for a host the verdict blames)."""
    launcher = str(app.probe_args.get("launcher") or "ssh")
    opts = WorldOptions(launcher=launcher)
    app.push_screen(WorldScreen(hosts, opts, bisect=bisect, title=title))
