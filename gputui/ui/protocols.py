"""What the dashboard's key mixins may use of the app, as a Protocol.

The mixins (actions.py, table_actions.py, way_out.py, story.py) hold the keys apart from the
app's layout and data flow (app.py). They used to be typed against GputuiApp itself, which
made each of them import the app module that imports them. Here is the part of the app they
rely on, and nothing else: a mixin method takes `self: AppLike`, mypy checks its body
against this list, and checks GputuiApp against the same list where the app calls such a
method. No module here imports the app.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.screen import Screen

    from gputui.collect.model import Job, ProcessInfo, Snapshot
    from gputui.collect.sampler import Sampler
    from gputui.collect.source import Source
    from gputui.ui.screens.tool_pane import ToolPane
    from gputui.ui.widgets.bars import KeyBar
    from gputui.ui.widgets.gpu_board import GpuBoard
    from gputui.ui.widgets.process_table import ProcessTable
    from gputui.watch.settings import WatchSettings
    from gputui.watch.watcher import Watcher


class AppLike(Protocol):
    """The dashboard as its key mixins see it (GputuiApp is the one implementation)."""

    # data, set by the app
    source: Source
    sampler: Sampler
    watcher: Watcher
    snapshot: Snapshot | None
    verdict: Any | None  # a Verdict, or a recorded one (gputui.diagnose.recorded)
    recent_snapshots: deque[Snapshot]
    story: Any  # a gputui.ui.actions.story.DemoStory, or None (not imported: it imports
    # the table mixin, which types against this protocol)
    settings: WatchSettings  # the Watcher's, which a bundle judges with too
    probe_args: dict[str, Any]
    bundle_dir: Path | None
    last_bundle: ToolPane | None  # the bundle pane of this session, for the way out

    # widgets, built in compose()
    table: ProcessTable
    board: GpuBoard
    keybar: KeyBar
    story_bar: Any  # gputui.ui.actions.story.StoryBar

    # textual's App
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None: ...

    def push_screen(
        self, screen: Screen[Any], callback: Callable[[Any], Any] | None = ...
    ) -> Any: ...

    def clear_notifications(self) -> None: ...

    def set_timer(self, delay: float, callback: Callable[[], Any] | None = ...) -> Any: ...

    # the app's own drawing
    def _render_snapshot(self) -> None: ...

    def _refresh_status(self) -> None: ...

    # the mixins' methods that other mixin methods call
    def _table(self) -> ProcessTable: ...

    def _note(self, text: str) -> None: ...

    def _select_suspect(self, quiet: bool) -> None: ...

    def _offer_keys(self) -> None: ...

    def selected_process(self) -> ProcessInfo | None: ...

    def _live_target(self, what: str) -> ProcessInfo | None: ...

    def _show_recorded_stack(self) -> bool: ...

    def _show_recorded_stacks(self) -> None: ...

    def _job_of(self, p: ProcessInfo) -> Job: ...
