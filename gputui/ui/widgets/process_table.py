"""The process table, drawn line by line: a header, then one line per row, scrolled by hand.

Each update rebuilds the row list (rows.py: sort, filter, tree) and compares the lines in the
visible window with the ones on screen; only lines that differ are repainted, and a line's
Strip is rebuilt only when its row's text, flag or selection changed. A sample that changes
two rows of a thousand repaints two lines.

The selection: once a person chose a row (a key, a click, `j`) or an alarm selected its
suspect, it follows that process (its row key, pid and create time), not the line number, so
it stays on the same process while rows move. Until then it is the top row, whatever comes
there: the first frame lists processes before their CPU% is known (pid 1 on top), and a
selection that clung to pid 1 after the rows re-sorted had `p` dump init. Each change of the
selected process is posted (SelectionChanged), so the key bar offers what applies to it.

Keys (htop/nvitop habits): up/down, PgUp/PgDn, Home/End; a click selects a row, a click on
a header sorts by that column and a second click reverses; the wheel scrolls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from gputui.collect.model import Job, ProcessInfo
from gputui.ui.keys import screen_bindings
from gputui.ui.widgets import rows as R
from gputui.ui.widgets.straggler_view import flag_label, flag_style
from gputui.ui.widgets.strips import Line, fit, repaint_changed

FLAG_TEXT = {
    "suspect": ("SUSP", "SUSPECT"),
    "waiting": ("wait", "waiting"),
    "busy": ("busy", "busy"),
}
FLAG_STYLE = {"suspect": "@hung", "waiting": "@waiting", "busy": "@busy"}
HEADER_STYLE = "bold reverse"
SELECTED_STYLE = "reverse"
HEADING_STYLE = "@heading"
_CELL_STYLE = {"state:Z": "@alert", "state:T": "@alert", "state:D": "@alert"}


class ProcessTable(Widget, can_focus=True):
    DEFAULT_CSS = "ProcessTable { height: 1fr; min-height: 3; }"
    BINDINGS = screen_bindings("table")

    class SelectionChanged(Message):
        """Another process is selected (or none)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.chosen = False  # a person or the alarm chose the selection: it follows the process
        self.rows: list[R.Row] = []
        self.sort_by = R.DEFAULT_SORT
        self.reverse = False
        self.filter_text = ""
        self.tree_view = False
        self.cursor: str | None = None  # row key of the selected process
        self.top_row = 0  # index of the first row shown
        self._data: tuple[Sequence[ProcessInfo], Sequence[Job], float, dict[int, str]] = (
            (),
            (),
            0.0,
            {},
        )
        self._shown: list[Strip] = []  # lines on screen, header first
        self._row_cache: dict[str, tuple[Any, Strip]] = {}
        self._head: tuple[tuple[Any, ...], Strip] | None = None  # what it was made of, header
        self._cols: tuple[tuple[R.Column, int], ...] = ()
        self._width = 0

    # ------------------------------------------------------------ data in

    def apply(
        self,
        processes: Sequence[ProcessInfo],
        jobs: Sequence[Job],
        now: float,
        flags: dict[int, str] | None = None,
    ) -> None:
        """Show these processes; `flags` marks pids as "suspect" or "waiting"."""
        self._data = (processes, jobs, now, flags or {})
        self._rebuild()

    def _rebuild(self) -> None:
        processes, jobs, now, flags = self._data
        self.rows = R.build_rows(
            processes,
            jobs,
            now,
            sort_by=self.sort_by,
            reverse=self.reverse,
            filter_text=self.filter_text,
            tree=self.tree_view,
            flags=flags,
            wide=self.size.width >= 120,
        )
        keys = [r.key for r in self.rows if r.proc is not None]
        if self.cursor not in keys or not self.chosen:
            top = keys[0] if keys else None
            self.chosen = self.chosen and top is not None and self.cursor in keys
            if top != self.cursor:
                self.cursor = top
                self.post_message(self.SelectionChanged())
        self._keep_cursor_visible()
        self._repaint()

    # ------------------------------------------------------------ drawing

    @property
    def page(self) -> int:
        return max(1, self.size.height - 1)

    def _keep_cursor_visible(self) -> None:
        i = self._cursor_index()
        page = self.page
        if i is not None:
            if i < self.top_row:
                self.top_row = i
            elif i >= self.top_row + page:
                self.top_row = i - page + 1
        self.top_row = max(0, min(self.top_row, max(0, len(self.rows) - page)))

    def _cursor_index(self) -> int | None:
        for i, r in enumerate(self.rows):
            if r.key == self.cursor:
                return i
        return None

    def _repaint(self) -> None:
        width, height = self.size
        if width <= 0 or height <= 0:
            return
        if width != self._width:
            self._width = width
            self._cols = R.visible_columns(width)
            self._row_cache.clear()
        base = self.rich_style  # the theme's background and text, under the spans' colours
        head = (width, self._cols, self.sort_by, self.reverse, self.filter_text, self.tree_view)
        if self._head is None or self._head[0] != (*head, base):  # the same header: kept
            self._head = ((*head, base), self._header(width).apply_style(base))
        new = [self._head[1]]
        for r in self.rows[self.top_row : self.top_row + height - 1]:
            new.append(self._line(r, width))
        new += [Strip.blank(width, base)] * (height - len(new))
        old, self._shown = self._shown, new
        repaint_changed(self, old, new, width, layout=False)

    def _header(self, width: int) -> Strip:
        line = Line()
        first = True
        for col, w in self._cols:
            if not first:
                line.add(" ", HEADER_STYLE)
            first = False
            title = col.title
            if col.id == self.sort_by:
                title += "▲" if self.reverse else "▼"
            line.cell(title, w, HEADER_STYLE, col.align if col.id != self.sort_by else "<")
        if self.filter_text or self.tree_view:
            extra = "  tree" if self.tree_view else ""
            extra += f"  filter: {self.filter_text}" if self.filter_text else ""
            line = Line().add(fit(_plain(line), max(0, width - len(extra))), HEADER_STYLE)
            line.add(extra, "@stalled")
        return line.strip(width, HEADER_STYLE)

    def _line(self, r: R.Row, width: int) -> Strip:
        selected = r.key == self.cursor and r.proc is not None
        state = (r.cells, r.flag, r.heading, selected)
        cached = self._row_cache.get(r.key)
        if cached is not None and cached[0] == state:
            return cached[1]
        strip = self._draw_row(r, selected, width).apply_style(self.rich_style)
        self._row_cache[r.key] = (state, strip)  # styled once: cleared when the theme changes
        return strip

    def _draw_row(self, r: R.Row, selected: bool, width: int) -> Strip:
        if r.proc is None:
            return Line().add(fit(r.heading, width), HEADING_STYLE).strip(width)
        base = SELECTED_STYLE if selected else ""
        text = dict(r.cells)
        wide = width >= 120
        line = Line()
        first = True
        for col, w in self._cols:
            if not first:
                line.add(" ", base)
            first = False
            if col.id == "flag":
                slow = flag_label(r.flag)  # a slow job's straggler, or a rank's wait share
                label = (slow or FLAG_TEXT.get(r.flag, ("", "")))[1 if wide else 0]
                line.cell(label, w, flag_style(r.flag) or FLAG_STYLE.get(r.flag, base))
                continue
            value = text.get(col.id, "")
            spec = _CELL_STYLE.get(f"{col.id}:{value[:1]}", "") if col.id == "state" else ""
            if col.id == "pid" and r.flag == "suspect":
                spec = "@alert"
            if selected:
                spec = f"{spec} reverse".strip()
            line.cell(value, w, spec or base, col.align)
        return line.strip(width, base)

    def render_line(self, y: int) -> Strip:
        if 0 <= y < len(self._shown):
            return self._shown[y]
        return Strip.blank(self.size.width, self.rich_style)

    def redraw(self) -> None:
        """Build every row again (the theme changed: gputui.ui.widgets.palette)."""
        self._row_cache.clear()
        self._head = None
        self._repaint()

    def on_resize(self) -> None:
        if self._data[0] or self.rows:
            self._rebuild()
        else:
            self._repaint()
        self.refresh()

    # ------------------------------------------------------------ selection

    def selected(self) -> ProcessInfo | None:
        for r in self.rows:
            if r.key == self.cursor:
                return r.proc
        return None

    def select_pid(self, pid: int) -> bool:
        """Select the row of `pid`, scroll it into view and follow it (`j`, an alarm)."""
        for r in self.rows:
            if r.proc is not None and r.proc.pid == pid:
                self._select(r.key)
                return True
        return False

    def _select(self, key: str | None) -> None:
        """A chosen row: from now on the selection follows its process."""
        if key is None:
            return
        self.chosen = True
        if key == self.cursor:
            return
        self.cursor = key
        self._keep_cursor_visible()
        self._repaint()
        self.post_message(self.SelectionChanged())

    def _process_keys(self) -> list[str]:
        return [r.key for r in self.rows if r.proc is not None]

    def action_move(self, delta: int) -> None:
        keys = self._process_keys()
        if not keys:
            return
        i = keys.index(self.cursor) if self.cursor in keys else 0
        self._select(keys[max(0, min(len(keys) - 1, i + delta))])

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(1, self.page - 1))

    def action_edge(self, direction: int) -> None:
        keys = self._process_keys()
        if keys:
            self._select(keys[-1] if direction > 0 else keys[0])
            if direction < 0:
                self.top_row = 0
                self._repaint()

    # ------------------------------------------------------------ sorting

    def sort(self, column: str, reverse: bool | None = None) -> None:
        """Sort by `column`; the same column again reverses (as a header click does)."""
        if reverse is None:
            reverse = not self.reverse if column == self.sort_by else False
        self.sort_by, self.reverse = column, reverse
        self._rebuild()

    def step_sort(self, delta: int) -> str:
        """`<` / `>`: the previous / next sortable column among those shown."""
        shown = [c.id for c, _ in self._cols if c.sort is not None] or list(R.SORTABLE)
        i = shown.index(self.sort_by) if self.sort_by in shown else 0
        self.sort(shown[(i + delta) % len(shown)], reverse=self.reverse)
        return self.sort_by

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self._rebuild()

    def set_tree(self, tree: bool) -> None:
        self.tree_view = tree
        self._rebuild()

    # ------------------------------------------------------------ mouse

    def on_click(self, event: Any) -> None:
        y, x = event.y, event.x
        if y == 0:
            pos = 0
            for col, w in self._cols:
                if pos <= x < pos + w + 1 and col.sort is not None:
                    self.sort(col.id)
                    return
                pos += w + 1
            return
        i = self.top_row + y - 1
        if 0 <= i < len(self.rows) and self.rows[i].proc is not None:
            self._select(self.rows[i].key)

    def on_mouse_scroll_down(self, event: Any) -> None:
        self._scroll(3)
        event.stop()

    def on_mouse_scroll_up(self, event: Any) -> None:
        self._scroll(-3)
        event.stop()

    def _scroll(self, delta: int) -> None:
        top = max(0, len(self.rows) - self.page)
        offset = max(0, min(top, self.top_row + delta))
        if offset != self.top_row:
            self.top_row = offset
            self._repaint()

    @property
    def lines_text(self) -> list[str]:
        return [s.text for s in self._shown]


def _plain(line: Line) -> str:
    return "".join(s.text for s in line.segments)
