"""The process table: rows keyed by (pid, create time), updated by diffing, never rebuilt.

Each update removes the rows that are gone, changes only the cells that differ, and adds
the new rows, inside one batch (dolphie's process list does the same). Rows are re-sorted
only when the order would change.

What Textual's DataTable does that costs (measured with bench/table_apply.py, 1000 rows):
- `update_cell(..., update_width=True)` re-measures every cell of the column on the next idle
  whenever the new value is narrower than the column: O(rows) per changed cell, ~26 s of
  blocked UI for a snapshot that changes 10% of the cells. So a cell asks for a width update
  only when it is wider than anything its column has held (the O(1) branch); columns never
  shrink, like top.
- a `str` cell is parsed as Rich markup on every measure and render: slow, and wrong for
  process data (`[environment not readable ...]`, `--gpus [0,1]` lost their brackets). Cells
  go to the DataTable as plain `Text`.
- `remove_row` rebuilds the row index: O(rows) per removed row. Rows that went away are
  removed in one pass (falls back to `remove_row` if DataTable's internals change).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable

from gputui.collect.model import Job, ProcessInfo
from gputui.ui.format import duration, mib, num

COLUMNS = (
    "!",
    "GPU",
    "PID",
    "rank",
    "job",
    "user",
    "GPU mem",
    "CPU%",
    "RSS",
    "state",
    "elapsed",
    "command",
)
SORTS: dict[str, Callable[[ProcessInfo, float], Any]] = {
    "GPU": lambda p, now: (p.gpus or (1 << 20,), p.pid),
    "PID": lambda p, now: p.pid,
    "CPU%": lambda p, now: -(p.cpu_percent or 0.0),
    "GPU mem": lambda p, now: -(p.gpu_mem_mb or 0.0),
    "RSS": lambda p, now: -(p.rss_mb or 0.0),
    "elapsed": lambda p, now: -(p.elapsed_s(now) or 0.0),
    "rank": lambda p, now: p.rank.rank if p.rank and p.rank.rank is not None else 1 << 20,
}
SORT_ORDER = ("GPU", "CPU%", "GPU mem", "RSS", "elapsed", "PID", "rank")


def row_key(p: ProcessInfo) -> str:
    return f"{p.pid}@{p.create_time or 0:.2f}"


def _plain(c: Any) -> Any:
    """A str cell as Text, so that DataTable never parses it as markup."""
    return Text(c) if isinstance(c, str) else c


def _width(c: Any) -> int:
    if isinstance(c, Text):
        return c.cell_len
    return cell_len(c) if isinstance(c, str) else len(str(c))


def matches(p: ProcessInfo, text: str) -> bool:
    """Case-insensitive substring filter over pid, user, state and command."""
    if not text:
        return True
    hay = f"{p.pid} {p.user or ''} {p.state or ''} {p.command}".lower()
    return all(word in hay for word in text.lower().split())


class ProcessTable(DataTable):
    DEFAULT_CSS = "ProcessTable { height: 1fr; }"

    def __init__(self, **kw: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)
        self.rows_shown: dict[str, tuple[Any, ...]] = {}
        self.procs: dict[str, ProcessInfo] = {}
        self.order: list[str] = []
        self.sort_by = "GPU"
        self.filter_text = ""
        self._widest: dict[str, int] = {c: cell_len(c) for c in COLUMNS}

    def on_mount(self) -> None:
        for c in COLUMNS:
            self.add_column(c, key=c)

    def _cells(self, p: ProcessInfo, job: Job | None, now: float, flag: Text) -> tuple[Any, ...]:
        rank = "-" if not p.rank or p.rank.rank is None else str(p.rank.rank)
        if p.env_error and rank == "-":
            rank = Text("?", style="dim")  # explained in the command column
        cmd = p.command if p.live or p.cmdline else f"{p.command} (recorded)"
        if p.env_error:
            cmd = f"{cmd}  [{p.env_error}]"
        state = Text(
            p.state or "?",
            style="bold red" if p.state in ("stopped", "zombie", "disk-sleep") else "",
        )
        return (
            flag,
            ",".join(map(str, p.gpus)) or "-",
            str(p.pid),
            rank,
            job.label.split(" (")[0][:18] if job else "-",
            (p.user or "?")[:10],
            mib(p.gpu_mem_mb),
            num(p.cpu_percent, "", 0),
            mib(p.rss_mb),
            state,
            duration(p.elapsed_s(now)),
            cmd,
        )

    def apply(
        self,
        processes: Sequence[ProcessInfo],
        jobs: Sequence[Job],
        now: float,
        flags: dict[int, Text] | None = None,
    ) -> None:
        """Bring the table to `processes` with the fewest changes."""
        flags = flags or {}
        job_of = {pid: j for j in jobs for pid in j.pids}
        wanted = {row_key(p): p for p in processes if matches(p, self.filter_text)}
        widest = self._widest
        changed: list[tuple[str, str, Any]] = []  # cells that keep their column's width
        with self.app.batch_update():
            gone = [k for k in self.rows_shown if k not in wanted]
            self._remove_rows(gone)
            for key in gone:
                del self.rows_shown[key]
            for key, p in wanted.items():
                cells = self._cells(p, job_of.get(p.pid), now, flags.get(p.pid, Text("")))
                old = self.rows_shown.get(key)
                if old is None:
                    for col, c in zip(COLUMNS, cells, strict=True):
                        w = _width(c)
                        if w > widest[col]:
                            widest[col] = w
                    self.add_row(*map(_plain, cells), key=key)
                elif old != cells:
                    for col, a, b in zip(COLUMNS, old, cells, strict=True):
                        if a != b:
                            w = _width(b)
                            grow = w > widest[col]
                            if grow:
                                widest[col] = w
                            if grow:
                                self.update_cell(key, col, _plain(b), update_width=True)
                            else:
                                changed.append((key, col, _plain(b)))
                self.rows_shown[key] = cells
            self._set_cells(changed)
            self.procs = wanted
            self._resort(now)

    def _set_cells(self, changed: list[tuple[str, str, Any]]) -> None:
        """update_cell for many cells at once: one cache invalidation and one refresh instead
        of one per cell (falls back to update_cell if DataTable's internals change)."""
        if not changed:
            return
        try:
            from textual.widgets._data_table import ColumnKey, RowKey

            data = self._data
            for key, col, value in changed:
                data[RowKey(key)][ColumnKey(col)] = value
        except (ImportError, AttributeError, KeyError):
            for key, col, value in changed:
                self.update_cell(key, col, value)
            return
        self._forget_rows({RowKey(key) for key, _, _ in changed})
        self.refresh()

    def _forget_rows(self, row_keys: set[Any]) -> None:
        """Drop the cached renders of these rows only.

        DataTable keys all its render caches by a table-wide update counter, so bumping it
        (what update_cell does) makes the next frame re-render every visible cell: ~75 ms on
        a GPU node's core for a full screen of rows. Values changed in place move no row,
        so only the changed rows' renderables, cells, row lines and screen lines need to go; the
        rest of the frame comes from the caches. Falls back to the counter if the internals
        differ.
        """
        try:
            cells, rows, lines = self._cell_render_cache, self._row_render_cache, self._line_cache
            for cache in (cells, rows):
                for k in [k for k in list(cache.keys()) if k[0] in row_keys]:
                    cache.discard(k)
            renderables = self._row_renderable_cache  # keyed (update count, row index)
            indices = {self._row_locations.get(rk) for rk in row_keys}
            for k in [k for k in list(renderables.keys()) if k[1] in indices]:
                renderables.discard(k)
            for k in list(lines.keys()):
                try:
                    stale = self._get_offsets(k[0])[0] in row_keys
                except LookupError:
                    stale = True
                if stale:
                    lines.discard(k)
        except (AttributeError, TypeError, IndexError):
            self._update_count += 1

    def _remove_rows(self, keys: list[str]) -> None:
        if len(keys) < 3 or not self._bulk_remove(keys):
            for key in keys:
                self.remove_row(key)

    def _bulk_remove(self, keys: list[str]) -> bool:
        """DataTable.remove_row for many rows at once: one index rebuild, one refresh."""
        try:
            from textual._two_way_dict import TwoWayDict
            from textual.widgets._data_table import CellKey, RowKey

            locations = self._row_locations
            data, rows, updated = self._data, self.rows, self._updated_cells
        except (ImportError, AttributeError):
            return False
        gone = {RowKey(k) for k in keys}
        kept = sorted((locations.get(rk), rk) for rk in locations if rk not in gone)
        self._require_update_dimensions = True
        self.check_idle()
        self._row_locations = TwoWayDict({rk: i for i, (_, rk) in enumerate(kept)})
        for rk in gone:
            for ck in data.get(rk, ()):
                updated.discard(CellKey(rk, ck))
            rows.pop(rk, None)
            data.pop(rk, None)
        self.cursor_coordinate = self.cursor_coordinate
        self.hover_coordinate = self.hover_coordinate
        self._update_count += 1
        self.refresh(layout=True)
        return True

    def _resort(self, now: float) -> None:
        keyf = SORTS[self.sort_by]
        order = sorted(self.procs, key=lambda k: keyf(self.procs[k], now))
        if order != self.order:
            self._sort_by_rank({k: i for i, k in enumerate(order)})
            self.order = order

    def _sort_by_rank(self, rank: dict[str, int]) -> None:
        # DataTable sorts by cell values; map each row back to its key through the PID cell
        # and the create-time-qualified key kept in self.procs.
        pid_to_key = {str(p.pid): k for k, p in self.procs.items()}
        self.sort("PID", key=lambda pid_cell: rank.get(pid_to_key.get(str(pid_cell), ""), 0))

    def cycle_sort(self) -> str:
        i = SORT_ORDER.index(self.sort_by) if self.sort_by in SORT_ORDER else -1
        self.sort_by = SORT_ORDER[(i + 1) % len(SORT_ORDER)]
        self.order = []
        return self.sort_by

    def selected(self) -> ProcessInfo | None:
        if not self.procs or self.cursor_row < 0 or self.row_count == 0:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # empty table / cursor out of range
            return None
        return self.procs.get(key or "")

    def select_pid(self, pid: int) -> bool:
        for key, p in self.procs.items():
            if p.pid == pid:
                self.move_cursor(row=self.get_row_index(key))
                return True
        return False
