"""The dashboard's keys that act on its own view: sort, filter, tree, GPU view, pause, and
selecting the suspect. Kept apart from the app's layout and data flow (app.py) and from the
keys that act on processes (actions.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.collect.model import ProcessInfo
from gputui.diagnose.states import State
from gputui.ui.keys import shown
from gputui.ui.widgets.bars import FilterChanged
from gputui.ui.widgets.process_table import ProcessTable

if TYPE_CHECKING:
    from gputui.ui.protocols import AppLike


class TableActions:
    """Mixin for GputuiApp."""

    def _table(self: AppLike) -> ProcessTable:
        return self.table

    def _note(self: AppLike, text: str) -> None:
        self.keybar.set_note(text)
        self.set_timer(3.0, lambda: self.keybar.set_note(""))

    def action_sort(self: AppLike) -> None:
        table = self._table()
        self._note(f"sorted by {table.step_sort(1)}")

    def action_sort_step(self: AppLike, delta: int) -> None:
        self._note(f"sorted by {self._table().step_sort(delta)}")

    def action_sort_reverse(self: AppLike) -> None:
        table = self._table()
        table.sort(table.sort_by, reverse=not table.reverse)

    def action_tree(self: AppLike) -> None:
        table = self._table()
        table.set_tree(not table.tree_view)

    def action_view(self: AppLike) -> None:
        board = self.board
        board.view = {"auto": "compact", "compact": "full", "full": "auto"}[board.view]
        board.redraw()
        self._note(f"GPU view: {board.view}")

    def action_pause(self: AppLike) -> None:
        self.sampler.pause(not self.sampler.paused)
        self._refresh_status()

    def action_filter(self: AppLike) -> None:
        self.keybar.start(self.table.filter_text)

    def action_clear_filter(self: AppLike) -> None:
        """esc: dismiss the message on screen (gputui.ui.widgets.notices), and clear the filter."""
        self.clear_notifications()
        if self._table().filter_text:
            self._table().set_filter("")

    def on_filter_changed(self: AppLike, msg: FilterChanged) -> None:
        table = self._table()
        table.set_filter(msg.text)
        table.focus()

    def action_jump_suspect(self: AppLike) -> None:
        self._select_suspect(quiet=False)

    def _select_suspect(self: AppLike, quiet: bool) -> None:
        v, snap = self.verdict, self.snapshot
        if v is None or snap is None or v.state == State.OK:
            if not quiet:
                self.notify("no stalled job: nothing to jump to", timeout=3)
            return
        table = self._table()
        pids = list(v.suspect_pids)
        pids += [p.pid for p in snap.processes if set(p.gpus) & set(v.suspects)]
        pids += [p.pid for p in snap.processes if set(p.gpus) & set(v.stragglers)]  # slow
        for pid in pids:
            if table.select_pid(pid):
                if not quiet:
                    table.focus()
                return
        if quiet:
            return
        gpus = ", ".join(map(str, v.suspects)) or "none"
        self.notify(
            f"suspect GPU {gpus} has no process any more: its rank has exited; "
            f"dump the waiting ranks ({shown('dump_all')}) to see where they wait",
            timeout=6,
        )

    def _offer_keys(self: AppLike) -> None:
        """The key bar offers the keys that have something to act on now."""
        from gputui.ui.keys import Moment, hidden_keys

        replay = self.source.kind == "replay"
        moment = Moment(
            replay, self.snapshot, self.verdict, self.table.selected(), bool(self.probe_args)
        )
        self.keybar.offer(hidden_keys(moment))

    def on_process_table_selection_changed(self: AppLike, _: ProcessTable.SelectionChanged) -> None:
        self._offer_keys()

    def selected_process(self: AppLike) -> ProcessInfo | None:
        p = self._table().selected()
        if p is None:
            self.notify("select a process first (up/down in the table)", timeout=3)
        return p
