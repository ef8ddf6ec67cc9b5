"""Every thread of a rank: the one that holds the GIL while the main thread cannot move.

Why: a rank's main thread in `synchronize` or `all_reduce` looks like a rank waiting for its
peers. But when another thread of the same process holds the GIL and runs Python (a metrics
thread in a regex that never ends, a logging thread in a tight loop), the main thread
cannot return from the native call: it needs the GIL to run its next line. py-spy marks
that thread `active+gil`; its innermost user frame is the line to change, and the rank is
the culprit however its main thread looks (on 4 x H200 gputui once called such a rank
"busy: works in native code under synchronize" and exited 0).

Pure: reads `RankStack.threads` (gputui.collect.frames), which a record written before
threads were kept does not have: such a rank has no holder, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gputui.collect.frames import Frame, RankStack, ThreadStack
from gputui.diagnose.hang.stack_reading import is_library, read_stack


@dataclass(frozen=True)
class Holder:
    """A thread other than the main one that keeps the main thread from running."""

    name: str
    frame: Frame  # its innermost user frame (else its innermost frame)
    gil: bool  # py-spy saw it hold the GIL (else: it was the one running Python)

    def words(self, who: str, main_waits_in: str | None) -> str:
        return holder_sentence(who, self.name, self.frame.label(), self.gil, main_waits_in)


def holder_sentence(who: str, name: str, frame: str, gil: bool, waits_in: str | None) -> str:
    """`rank 1: thread `stats` holds the GIL in parse_record (train.py:13); its main thread
    cannot leave synchronize`: the same words from the stacks and from the progress dumps,
    so the verdict says it once."""
    verb = "holds the GIL in" if gil else "runs Python in"
    line = f"{who}: thread `{name}` {verb} {frame}"
    if waits_in:
        return f"{line}; its main thread cannot leave {waits_in}"
    return f"{line}; its main thread cannot run"


def holder_of(threads: Sequence[ThreadStack], main_frames: Sequence[Frame]) -> Holder | None:
    """The side thread that holds the GIL (or, none holding it, runs Python) in user code
    while the main thread waits in a collective or `synchronize`; else None.

    Both conditions keep a moment from being blamed: a library thread (a queue feeder, a
    progress bar) holding the GIL for an instant blocks nobody, and a main thread that
    waits on a queue or a lock has a reason of its own (its children: hang.children).
    """
    if not threads or read_stack(main_frames).collective is None:
        return None
    best = next((t for t in threads if t.gil and _has_user_frame(t.frames)), None)
    if best is None and not any(t.gil for t in threads):
        best = next((t for t in threads if t.active and _has_user_frame(t.frames)), None)
    if best is None:
        return None
    frame = read_stack(best.frames).frame
    if frame is None or is_library(frame):
        return None
    return Holder(best.name or f"tid {best.tid}", frame, best.gil)


def rank_holder(s: RankStack) -> Holder | None:
    """The holder of a rank's dump, when its main thread stands still (not `active`)."""
    if not s.ok or not s.threads:
        return None
    main_running = s.thread is not None and "gil" in s.thread.split("+")
    if main_running:
        return None
    return holder_of(s.threads, s.frames)


def _has_user_frame(frames: Sequence[Frame]) -> bool:
    return any(not is_library(f) for f in frames)


def entry_lines(entry: dict[str, Any], indent: str = "    ") -> list[str]:
    """Every thread and child of one `check --json` stack entry, as the stack pane, the
    details screen and a replay's `a` show them: the thread holding the GIL first (it is
    why the main thread cannot move), then the main thread, then the other threads, then
    the children. An entry from an old record (its main thread only) gives its frames."""
    main = [str(f) for f in entry.get("stack") or ()]
    threads = [t for t in entry.get("threads") or () if isinstance(t, dict)]
    children = [c for c in entry.get("children") or () if isinstance(c, dict)]
    if not threads and not children:
        return [f"{indent}{f}" for f in main]
    first = [t for t in threads[:1] if "gil" in str(t.get("status", "")).split("+")]
    rest = [t for t in threads if not first or t is not first[0]]
    out: list[str] = []
    for t in first:
        out += _thread_block(t, indent, "  <-- holds the GIL")
    out.append(f"{indent}thread `MainThread`")
    out += [f"{indent}    {f}" for f in main]
    for t in rest:
        out += _thread_block(t, indent, "")
    for c in children:
        state = c.get("status") or c.get("outcome")
        out.append(f"{indent}child pid {c.get('pid')}: {c.get('role')} ({state})")
        if c.get("error"):
            out.append(f"{indent}    {c.get('error')}")
        out += [f"{indent}    {f}" for f in c.get("stack") or ()]
    return out


def _thread_block(t: dict[str, Any], indent: str, mark: str) -> list[str]:
    head = f"{indent}thread `{t.get('name')}` ({t.get('status')}){mark}"
    return [head, *(f"{indent}    {f}" for f in t.get("stack") or ())]


def side_json(s: RankStack) -> dict[str, Any]:
    """A rank's other threads and its children as `check --json` shows them (labels, not
    frame triples); empty for a dump that had neither (an old record's keys stay as they were)."""
    out: dict[str, Any] = {}
    if s.threads:
        out["threads"] = [
            {"name": t.name, "status": t.status, "stack": [f.label() for f in t.frames]}
            for t in s.threads
        ]
    if s.children:
        out["children"] = [
            {
                "pid": c.pid,
                "role": c.role,
                "outcome": c.outcome,
                "status": c.status,
                "stack": [f.label() for f in c.frames],
                "error": c.error,
            }
            for c in s.children
        ]
    return out
