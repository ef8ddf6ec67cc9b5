"""A rank's children, dumped beside it: DataLoader workers, spawn children, compile workers.

Why: a rank whose main thread waits in `for batch in loader` shows `Queue.get`, and the
line a person needs is in the worker that never answers (PyTorch issue 87995: rank 0
"stuck at dataloader", 31 ranks in all_reduce, and no way to see which worker). So when a
rank's main thread is outside any collective, its child processes are read from the process
tree (psutil) and each gets one py-spy dump, bounded: at most MAX_CHILDREN, each within
the dump's own time limit, stopped by `cancel`.

A child's role comes from what it runs: torch names its DataLoader workers' threads
`pt_data_worker` and their main thread stands in `_worker_loop`; the n-th such child by
start time is worker n (torch starts them in order of their worker id).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import psutil

from gputui.collect.frames import MAX_CHILDREN, MAX_SIDE_FRAMES, ChildStack, Frame, clip
from gputui.redact import redact_text
from gputui.tools.result import Cancel, Outcome, ToolResult

_LOADER_FRAME = "_worker_loop"
_LOADER_NAME = "pt_data_worker"
_COMPILE = ("compile_worker", "SubprocPool", "_async_compile")


def role_of(name: str, frames: Sequence[Frame]) -> str:
    """What a child is, from its process name and its main thread's frames."""
    funcs = [f.function.rsplit(".", 1)[-1] for f in frames]
    files = [f.file for f in frames]
    if name.startswith(_LOADER_NAME) or _LOADER_FRAME in funcs:
        return "DataLoader worker"
    if any(any(c in x for c in _COMPILE) for x in [*funcs, *files]):
        return "compile worker"
    if any("multiprocessing/spawn" in x or "multiprocessing/popen" in x for x in files):
        return "spawn child"
    return "child"


def children_of(pid: int) -> list[psutil.Process]:
    """A process's direct children, oldest first (the order torch starts its workers in)."""
    try:
        kids = psutil.Process(pid).children(recursive=False)
    except psutil.Error:
        return []
    out = []
    for k in kids:
        try:
            out.append((k.create_time(), k.pid, k))
        except psutil.Error:
            continue
    return [k for _, _, k in sorted(out)][:MAX_CHILDREN]


def _dump_once_more(
    pid: int, dump: Callable[..., ToolResult], timeout: float | None, cancel: Cancel | None
) -> ToolResult:
    """One dump of a child, tried a second time when the first failed while it lives: the
    progress watch may be reading the same child at that moment (one tracer at a time)."""
    res = ToolResult("py-spy", pid, Outcome.FAILED, "not dumped")
    for _ in range(2):
        try:
            res = dump(pid, timeout=timeout, cancel=cancel)
        except Exception as e:  # one child's surprise must not lose the rank's own stack
            res = ToolResult("py-spy", pid, Outcome.FAILED, f"{type(e).__name__}: {e}")
        if res.ok or res.outcome in (Outcome.GONE, Outcome.MISSING, Outcome.CANCELLED):
            break
    return res


def dump_children(
    pid: int,
    dump: Callable[..., ToolResult],
    *,
    timeout: float | None,
    cancel: Cancel | None,
    parse: Callable[[Sequence[str]], tuple],
) -> tuple[ChildStack, ...]:
    """One dump of each child of `pid`, with its role ("DataLoader worker 1")."""
    from gputui.collect.frames import main_thread

    found: list[tuple[str, ChildStack]] = []
    for kid in children_of(pid):
        if cancel is not None and cancel.is_set():
            break
        try:
            name = kid.name()
        except psutil.Error:
            continue
        res = _dump_once_more(kid.pid, dump, timeout, cancel)
        threads = parse(res.lines) if res.ok else ()
        mt = main_thread(threads)
        frames = tuple(
            Frame(clip(redact_text(f.function)), clip(redact_text(f.file)), f.line)
            for f in (mt.frames if mt else ())[:MAX_SIDE_FRAMES]
        )
        outcome = res.outcome if res.outcome is not Outcome.CANCELLED else Outcome.FAILED
        error = None if res.ok else clip(redact_text(res.message or str(outcome.value)))
        role = role_of(name, mt.frames if mt else ())
        found.append(
            (
                role,
                ChildStack(kid.pid, role, outcome.value, frames, mt.status if mt else None, error),
            )
        )
    # Number the workers of each kind in start order: "DataLoader worker 0", "... 1".
    seen: dict[str, int] = {}
    out = []
    for role, c in found:
        if role in ("DataLoader worker", "compile worker"):
            n = seen.get(role, 0)
            seen[role] = n + 1
            c = ChildStack(c.pid, f"{role} {n}", c.outcome, c.frames, c.status, c.error)
        out.append(c)
    return tuple(out)
