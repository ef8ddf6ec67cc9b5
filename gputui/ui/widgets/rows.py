"""What the process table shows, as plain data: columns, row cells, sort, filter and tree.

Pure functions over ProcessInfo and Job, kept apart from drawing so the table widget only
turns rows into lines, and so sorting, filtering and the tree are tested without a screen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gputui.collect.model import Job, ProcessInfo
from gputui.ui.widgets.format import duration, mib, num

SortKey = Callable[[ProcessInfo, float], Any]


@dataclass(frozen=True)
class Column:
    id: str
    title: str
    width: int  # 0: takes the rest of the line
    align: str = "<"
    sort: SortKey | None = None
    min_screen: int = 0  # shown only when the table is at least this wide
    wide_width: int = 0  # a wider form at >= 120 columns (0: same)


def _rank(p: ProcessInfo) -> int:
    return p.rank.rank if p.rank and p.rank.rank is not None else 1 << 30


def _master(p: ProcessInfo) -> str:
    return (p.rank.master if p.rank else None) or ""


COLUMNS: tuple[Column, ...] = (
    Column("flag", "", 4, wide_width=7),
    Column("gpu", "GPU", 4, ">", lambda p, now: (p.gpus or (1 << 20,), p.pid)),
    Column("pid", "PID", 7, ">", lambda p, now: p.pid),
    Column("rank", "RANK", 5, ">", lambda p, now: (_rank(p), p.pid)),
    Column(
        "job",
        "JOB",
        16,
        sort=lambda p, now: (p.rank.master if p.rank else "") or "",
        min_screen=120,
    ),
    Column("user", "USER", 7, sort=lambda p, now: p.user or ""),
    Column("gpumem", "GPUMEM", 7, ">", lambda p, now: -(p.gpu_mem_mb or 0.0)),
    Column("cpu", "CPU%", 6, ">", lambda p, now: -(p.cpu_percent or 0.0)),
    Column("rss", "RSS", 6, ">", lambda p, now: -(p.rss_mb or 0.0)),
    Column("state", "S", 2, sort=lambda p, now: p.state or "", wide_width=8),
    Column("elapsed", "ELAPSED", 8, ">", lambda p, now: -(p.elapsed_s(now) or 0.0), 100),
    Column("command", "COMMAND", 0, sort=lambda p, now: p.command),
)
BY_ID = {c.id: c for c in COLUMNS}
SORTABLE = tuple(c.id for c in COLUMNS if c.sort is not None)
DEFAULT_SORT = "gpu"

_STATE_LETTER = {
    "running": "R",
    "sleeping": "S",
    "disk-sleep": "D",
    "stopped": "T",
    "tracing-stop": "t",
    "zombie": "Z",
    "dead": "X",
    "idle": "I",
    "unknown": "?",
}


def visible_columns(width: int) -> tuple[tuple[Column, int], ...]:
    """The columns shown at this table width, each with its width (command takes the rest)."""
    wide = width >= 120
    cols = [c for c in COLUMNS if width >= c.min_screen]
    fixed = [(c, c.wide_width if wide and c.wide_width else c.width) for c in cols]
    used = sum(w for _, w in fixed if w) + len(fixed) - 1
    return tuple((c, w or max(8, width - used)) for c, w in fixed)


def row_key(p: ProcessInfo) -> str:
    """Identity of a row: pid and create time, so a recycled pid is a new row."""
    return f"{p.pid}@{p.create_time or 0:.2f}"


def matches(p: ProcessInfo, text: str) -> bool:
    """Case-insensitive filter over pid, user, state, rank and command: all words must occur."""
    if not text:
        return True
    rank = f"rank{p.rank.rank}" if p.rank and p.rank.rank is not None else ""
    owner = p.owner.short() if p.owner is not None else ""
    hay = f"{p.pid} {p.user or ''} {p.state or ''} {rank} {owner} {p.command}".lower()
    return all(word in hay for word in text.lower().split())


def shown_command(p: ProcessInfo) -> str:
    """The command line with the program's directory left out (`python3 train.py`, not
    `/opt/torch/.venv/bin/python3 train.py`): at 80 columns the interpreter's path would
    fill the column and hide the script, the part that tells ranks and jobs apart. The
    filter and the details screen keep the whole line."""
    if not p.cmdline:
        return p.command
    first = p.cmdline[0]
    return " ".join([first.rsplit("/", 1)[-1] or first, *p.cmdline[1:]])


def cells(p: ProcessInfo, job: Job | None, now: float, wide: bool) -> dict[str, str]:
    """Every column's text for one process."""
    rank = "-" if not p.rank or p.rank.rank is None else str(p.rank.rank)
    # Only a GPU process's unreadable environment matters (its rank is read from it); for
    # the host processes of a node without GPUs (kernel threads first) it was noise.
    env_error = p.env_error if p.gpus else None
    if env_error and rank == "-":
        rank = "?"  # explained in the command column
    cmd = shown_command(p) if p.live or p.cmdline else f"{p.command} (recorded)"
    if env_error:
        cmd = f"{cmd}  [{p.env_error}]"
    if p.owner is not None:  # the pod, container or Slurm job a person acts on
        cmd = f"[{p.owner.short()}] {cmd}"
    if p.nvml_pid is not None:
        cmd += f"  (NVML pid {p.nvml_pid}{', matched by guess' if p.pid_guess else ''})"
    state = p.state or "?"
    return {
        "gpu": ",".join(map(str, p.gpus)) or "-",
        "pid": str(p.pid),
        "rank": rank,
        "job": job.label.split(" (")[0] if job else "-",
        "user": p.user or "?",
        "gpumem": mib(p.gpu_mem_mb),
        "cpu": num(p.cpu_percent, "", 0),
        "rss": mib(p.rss_mb),
        "state": state if wide else _STATE_LETTER.get(state, state[:1]),
        "elapsed": duration(p.elapsed_s(now)),
        "command": cmd,
    }


@dataclass(frozen=True)
class Row:
    """One line of the table: a process, or (in tree view) a job heading."""

    key: str
    proc: ProcessInfo | None
    cells: tuple[tuple[str, str], ...]  # (column id, text)
    flag: str = ""  # "suspect", "waiting" or ""
    heading: str = ""  # text of a job heading row (proc is None)


def build_rows(
    processes: Sequence[ProcessInfo],
    jobs: Sequence[Job],
    now: float,
    *,
    sort_by: str = DEFAULT_SORT,
    reverse: bool = False,
    filter_text: str = "",
    tree: bool = False,
    flags: dict[int, str] | None = None,
    wide: bool = False,
) -> list[Row]:
    """The table's rows in display order."""
    flags = flags or {}
    job_of = {pid: j for j in jobs for pid in j.pids}
    shown = [p for p in processes if matches(p, filter_text)]
    col = BY_ID.get(sort_by) or BY_ID[DEFAULT_SORT]
    key = col.sort or BY_ID[DEFAULT_SORT].sort
    assert key is not None
    shown.sort(key=lambda p: key(p, now), reverse=reverse)

    def row(p: ProcessInfo, prefix: str = "") -> Row:
        c = cells(p, job_of.get(p.pid), now, wide)
        if prefix:
            c["command"] = prefix + c["command"]
        return Row(row_key(p), p, tuple(c.items()), flags.get(p.pid, ""))

    if not tree:
        return [row(p) for p in shown]
    return _tree(shown, jobs, row)


def _tree(shown: list[ProcessInfo], jobs: Sequence[Job], row: Callable[..., Row]) -> list[Row]:
    """Jobs as headings with their ranks under them (rank order); other processes last."""
    out: list[Row] = []
    placed: set[int] = set()
    by_pid = {p.pid: p for p in shown}
    for job in jobs:
        members = [by_pid[pid] for pid in job.pids if pid in by_pid]
        if len(job.pids) < 2 or not members:
            continue
        members.sort(key=lambda p: (_rank(p), p.pid))
        world = f", world {job.world_size}" if job.world_size else ""
        launcher = _launcher(members)
        text = f"▾ job {job.label.split(' (')[0]}  ({len(job.pids)} ranks{world}; {job.how})"
        if launcher:
            text += f"  launcher: {launcher}"
        out.append(Row(f"job:{job.key}", None, (), heading=text))
        for i, p in enumerate(members):
            out.append(row(p, "└─ " if i == len(members) - 1 else "├─ "))
            placed.add(p.pid)
    rest = [p for p in shown if p.pid not in placed]
    if rest and out:
        out.append(Row("job:~other", None, (), heading="▾ other processes"))
    out.extend(row(p) for p in rest)
    return out


def _launcher(members: Sequence[ProcessInfo]) -> str:
    """`pid 800 torchrun ...` when every rank has the same parent."""
    parents = {p.ppid for p in members}
    if len(parents) != 1 or None in parents:
        return ""
    cmd = members[0].parent_cmd or ""
    return f"pid {members[0].ppid} {cmd}".strip()
