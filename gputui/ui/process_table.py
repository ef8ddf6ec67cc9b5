"""The process table: rows keyed by (pid, create time), updated by diffing, never rebuilt.

Each update removes the rows that are gone, changes only the cells that differ, and adds
the new rows, inside one batch (dolphie's process list does the same). Rows are re-sorted
only when the order would change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

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
        with self.app.batch_update():
            for key in [k for k in self.rows_shown if k not in wanted]:
                self.remove_row(key)
                del self.rows_shown[key]
            for key, p in wanted.items():
                cells = self._cells(p, job_of.get(p.pid), now, flags.get(p.pid, Text("")))
                old = self.rows_shown.get(key)
                if old is None:
                    self.add_row(*cells, key=key)
                elif old != cells:
                    for col, (a, b) in zip(COLUMNS, zip(old, cells, strict=False), strict=False):
                        if a != b:
                            self.update_cell(key, col, b, update_width=True)
                self.rows_shown[key] = cells
            self.procs = wanted
            self._resort(now)

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
