"""Dump all ranks of a job at once and group identical stacks, so the odd rank stands out.

The idea of LLNL's STAT: in a hang, most ranks wait in the same place (all_reduce,
synchronize) and the culprit is somewhere else (a data loader, a sleep, gone). Stacks are
compared on the main thread only (gputui.tools.attach.rank_dump says why, and holds each
process's dump and the forms it is written in).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import psutil

from gputui.collect.frames import (
    ChildStack,
    Frame,
    RankStack,
    ThreadStack,
    collective_name,
    main_thread,
)
from gputui.collect.model import ProcessInfo
from gputui.tools.attach.ptrace import Target
from gputui.tools.attach.rank_dump import RankDump, rank_order, rank_stack, side_entry
from gputui.tools.attach.stacks import TargetLike, py_spy_dump
from gputui.tools.result import Cancel, LineSink, Outcome, ToolResult

MAX_WORKERS = 8  # py-spy is cheap (14 ms); more threads would only contend for the CPU

_THREAD = re.compile(r'^Thread (?P<tid>\S+) \((?P<status>[^)]*)\)(?::\s*"(?P<name>.*)")?')
_FRAME = re.compile(r"^\s+(?P<func>.+?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)\s*$")


def parse_py_spy(lines: Sequence[str]) -> tuple[ThreadStack, ...]:
    """Threads and frames of `py-spy dump` output (plain or --native)."""
    threads: list[ThreadStack] = []
    cur: dict[str, Any] | None = None
    for ln in lines:
        m = _THREAD.match(ln)
        if m:
            if cur is not None:
                threads.append(ThreadStack(**{**cur, "frames": tuple(cur["frames"])}))
            cur = {"tid": m["tid"], "status": m["status"], "name": m["name"] or "", "frames": []}
            continue
        f = _FRAME.match(ln)
        if f and cur is not None:
            line = int(f["line"]) if f["line"] else None
            cur["frames"].append(Frame(f["func"], f["file"], line))
    if cur is not None:
        threads.append(ThreadStack(**{**cur, "frames": tuple(cur["frames"])}))
    return tuple(threads)


@dataclass(frozen=True)
class StackGroup:
    """Processes whose main threads stand in the same place."""

    members: tuple[RankDump, ...]
    odd: bool = False  # not where the majority (or the ranks in a collective) are

    @property
    def ok(self) -> bool:
        return self.members[0].result.ok

    @property
    def stack(self) -> tuple[str, ...]:
        """The main thread's frames, innermost first (as py-spy prints them)."""
        mt = main_thread(self.members[0].threads)
        return tuple(f.label() for f in mt.frames) if mt else ()

    @property
    def in_collective(self) -> bool:
        mt = main_thread(self.members[0].threads)
        return mt is not None and any(collective_name(f) for f in mt.frames)

    def header(self) -> str:
        """`ranks 0,2,3 (3 processes)`; pids where the rank is unknown."""
        ranks = [m.rank for m in self.members if m.rank is not None]
        pids = [m.pid for m in self.members if m.rank is None]
        parts = []
        if ranks:
            parts.append(("rank " if len(ranks) == 1 else "ranks ") + ",".join(map(str, ranks)))
        if pids:
            parts.append(("pid " if len(pids) == 1 else "pids ") + ",".join(map(str, pids)))
        n = len(self.members)
        return f"{', '.join(parts)} ({n} process{'es' if n != 1 else ''})"

    def body(self) -> list[str]:
        if not self.ok:
            return [
                f"dump failed: {m.label} (pid {m.pid}): {m.result.message}" for m in self.members
            ]
        pids = ", ".join(str(m.pid) for m in self.members)
        lines = [f"pids {pids}", *(f"    {s}" for s in self.stack)]
        if not self.odd and len(self.members) > 1:
            return lines
        # The rank that stands out: every thread (the GIL holder first) and every child.
        from gputui.diagnose.hang.threads import entry_lines

        for m in self.members:
            entry = side_entry(m)
            if entry.get("threads") or entry.get("children"):
                lines += [f"pid {m.pid}, every thread and child:", *entry_lines(entry)]
        return lines


def group_dumps(dumps: Sequence[RankDump]) -> tuple[StackGroup, ...]:
    """Groups of identical main-thread stacks, biggest first; the odd ones marked.

    With a clear majority, every other group is odd. On a tie (two ranks, each somewhere
    else), the groups inside a collective or synchronize are the waiting ones and the rest
    are odd; failed dumps are always odd.
    """
    by_key: dict[tuple[Any, ...], list[RankDump]] = {}
    for d in dumps:
        by_key.setdefault(d.key(), []).append(d)
    groups = [StackGroup(tuple(sorted(ms, key=rank_order))) for ms in by_key.values()]
    groups.sort(
        key=lambda g: (-len(g.members), not g.ok, not g.in_collective, rank_order(g.members[0]))
    )
    if len(groups) < 2:
        return tuple(groups)
    top = len(groups[0].members)
    leaders = [g for g in groups if len(g.members) == top and g.ok]
    if len(leaders) == 1:
        majority = {id(leaders[0])}
    else:
        waiting = [g for g in leaders if g.in_collective]
        majority = {id(g) for g in waiting} if 0 < len(waiting) < len(leaders) else set()
        if not majority:
            majority = {id(g) for g in leaders}  # no way to tell: only failures are odd
    return tuple(StackGroup(g.members, odd=id(g) not in majority) for g in groups)


@dataclass(frozen=True)
class DumpAll:
    """The grouped result of dumping every rank of a job."""

    groups: tuple[StackGroup, ...]
    dumps: tuple[RankDump, ...]
    elapsed_s: float
    how: str = ""  # how the job's processes were found

    @property
    def ok(self) -> bool:
        return all(d.result.ok for d in self.dumps)

    @property
    def outcome(self) -> Outcome:
        return Outcome.DONE if self.ok else Outcome.FAILED

    def summary_lines(self) -> list[str]:
        n, g = len(self.dumps), len(self.groups)
        failed = [d for d in self.dumps if not d.result.ok]
        head = f"dumped {n} process{'es' if n != 1 else ''} in {self.elapsed_s:.2f} s: "
        head += f"{g} distinct stack{'s' if g != 1 else ''}"
        if failed:
            head += f", {len(failed)} failed"
        odd = [grp.header() for grp in self.groups if grp.odd]
        lines = [head]
        if odd:
            lines.append("stands out: " + "; ".join(odd))
        return lines

    def render(self) -> list[tuple[str, str]]:
        """(text, kind) lines for a UI; kind is header, odd-header, frame or note."""
        out: list[tuple[str, str]] = []
        if self.how:
            out.append((f"job: {self.how}", "note"))
        for grp in self.groups:
            mark = "  <-- differs" if grp.odd else ""
            out.append((grp.header() + mark, "odd-header" if grp.odd else "header"))
            out.extend((ln, "frame") for ln in grp.body())
            out.append(("", "frame"))
        out.extend((ln, "note") for ln in self.summary_lines())
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "how": self.how,
            "elapsed_s": round(self.elapsed_s, 3),
            "groups": [
                {
                    "header": g.header(),
                    "odd": g.odd,
                    "ok": g.ok,
                    "ranks": [m.rank for m in g.members],
                    "pids": [m.pid for m in g.members],
                    "stack": list(g.stack),
                }
                for g in self.groups
            ],
            "results": [{**d.result.to_json(), "rank": d.rank} for d in self.dumps],
        }


def _rank_of(t: TargetLike, ranks: Mapping[int, int | None] | None) -> int | None:
    pid = Target.of(t).pid
    if ranks and pid in ranks:
        return ranks[pid]
    rank = getattr(t, "rank", None)
    if rank is not None and getattr(rank, "rank", None) is not None:
        return int(rank.rank)
    try:
        v = psutil.Process(pid).environ().get("RANK")
        return int(v) if v is not None else None
    except (psutil.Error, ValueError):
        return None


def dump_all(
    targets: Sequence[TargetLike],
    *,
    ranks: Mapping[int, int | None] | None = None,
    native: bool = False,
    timeout: float | None = None,
    max_workers: int = MAX_WORKERS,
    on_line: LineSink | None = None,
    cancel: Cancel | None = None,
    tool_path: str | None = None,
    how: str = "",
    dump: Callable[..., ToolResult] = py_spy_dump,
    children: bool = True,
) -> DumpAll:
    """py-spy every target in parallel (bounded pool) and group the stacks.

    `on_line` gets one progress line per finished process, from worker threads, one at a
    time (a lock serialises them). With `children`, a rank whose main thread is in no
    collective has its child processes dumped too (gputui.tools.attach.children): the
    DataLoader worker it waits for is where its hang is.

    Args:
        targets: the processes (pids, ProcessInfos or Targets).
        ranks: pid -> rank, to name each stack's rank; None: from the targets.
        native: py-spy's `--native`: C/C++ frames too (slower, pauses longer).
        timeout: seconds per process; None: py-spy's default bound.
        max_workers: how many processes are dumped at once.
        on_line: called with one progress line per finished process; None: none.
        cancel: set to stop the tool at once (its process is killed); None: run to its end.
        tool_path: a directory to look for the tool in first; None: PATH (gputui.tools.which).
        how: how the job's processes were found, said with the result.
        dump: the function that dumps one process (tests pass a stand-in).
        children: dump the children of a rank whose main thread is in no collective.

    Returns:
        The DumpAll: each process's ToolResult and stacks, grouped by where they stand.
    """
    start = time.monotonic()
    lock = threading.Lock()

    def one(t: TargetLike) -> RankDump:
        rank = _rank_of(t, ranks)
        try:
            res = dump(t, native=native, timeout=timeout, cancel=cancel, tool_path=tool_path)
        except Exception as e:  # one rank's surprise must not lose the other ranks' stacks
            msg = f"{type(e).__name__}: {e}"
            res = ToolResult("py-spy", Target.of(t).pid, Outcome.FAILED, msg)
        threads = parse_py_spy(res.lines) if res.ok else ()
        kids: tuple[ChildStack, ...] = ()
        mt = main_thread(threads)
        if children and mt is not None and not any(collective_name(f) for f in mt.frames):
            from gputui.tools.attach.children import dump_children

            def one_child(pid: int, **kw: Any) -> ToolResult:
                return dump(pid, native=False, tool_path=tool_path, **kw)

            kids = dump_children(
                Target.of(t).pid, one_child, timeout=timeout, cancel=cancel, parse=parse_py_spy
            )
        d = RankDump(Target.of(t).pid, rank, res, threads, kids)
        if on_line is not None:
            with lock:
                on_line(f"{d.label}: {res.summary()}")
        return d

    workers = max(1, min(max_workers, len(targets)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dump-all") as pool:
        dumps = list(pool.map(one, targets))
    dumps.sort(key=rank_order)
    return DumpAll(group_dumps(dumps), tuple(dumps), time.monotonic() - start, how)


# ---------------------------------------------------------------- as evidence


def stacks_record(
    res: DumpAll,
    *,
    t: float,
    job: str,
    trigger: str,
    processes: Sequence[ProcessInfo] = (),
    gone: Sequence[RankStack] = (),
) -> dict[str, Any]:
    """The typed record `{"type": "stacks", ...}` of a dump of every local rank of a job.

    `gone` are the ranks that could not be dumped because their process had already exited
    (the detector's vanished GPUs): they are part of the answer, so they are in the record.

    Args:
        res: the dump (dump_all).
        t: the record's time (Unix seconds).
        job: the job's key.
        trigger: what started the dump (`stalled`, `hung`, `key`).
        processes: the job's processes, for their ranks and GPUs.
        gone: the ranks whose processes had exited before the dump.

    Returns:
        The `stacks` record (a JSON-able dict).
    """
    by_pid = {p.pid: p for p in processes}
    ranks = [rank_stack(d, by_pid.get(d.pid)) for d in res.dumps] + list(gone)
    ranks.sort(key=lambda r: (r.rank if r.rank is not None else 1 << 30, r.gpu or 0, r.pid or 0))
    return {
        "type": "stacks",
        "t": round(t, 3),
        "job": job,
        "trigger": trigger,
        "tool": "py-spy",
        "elapsed_s": round(res.elapsed_s, 4),
        "ranks": [r.to_json() for r in ranks],
    }
