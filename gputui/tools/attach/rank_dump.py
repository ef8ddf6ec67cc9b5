"""One process's dump, and the forms it travels in: the key its main thread is grouped by
(gputui.tools.attach.dumpall), its `check --json` stack entry, and its entry in a `stacks`
record, bounded and redacted, because it is written to files.

Stacks are compared on the main thread only, frame by frame as (function, file, line): other
threads (NCCL watchdog, loader workers) differ in number and tids between healthy ranks, and
`active`/`idle` flips from one sample to the next, so neither may split a group. Native
frames that are bare addresses are dropped: libraries load at different addresses per rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gputui.collect.frames import (
    MAX_FRAMES,
    MAX_SIDE_FRAMES,
    MAX_THREADS,
    ChildStack,
    Frame,
    RankStack,
    ThreadStack,
    clip,
    main_thread,
)
from gputui.collect.model import ProcessInfo
from gputui.redact import redact_text
from gputui.tools.result import Outcome, ToolResult


def _comparable(frames: Sequence[Frame]) -> tuple[tuple[str, str, int | None], ...]:
    return tuple((f.function, f.file, f.line) for f in frames if not f.function.startswith("0x"))


@dataclass(frozen=True)
class RankDump:
    """One process's dump, with the rank it holds (None when unknown)."""

    pid: int
    rank: int | None
    result: ToolResult
    threads: tuple[ThreadStack, ...]
    children: tuple[ChildStack, ...] = ()  # dumped when its main thread is in no collective

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"

    def key(self) -> tuple[Any, ...]:
        if not self.result.ok:
            return ("failed", self.result.outcome.value)
        mt = main_thread(self.threads)
        return ("stack", _comparable(mt.frames) if mt else ())


def rank_order(d: RankDump) -> tuple[int, int]:
    """Ranks in order, then processes of no known rank by pid."""
    return (d.rank if d.rank is not None else 1 << 30, d.pid)


def side_entry(d: RankDump) -> dict[str, Any]:
    """A dump in the shape of a `check --json` stack entry (labels, not frame triples)."""
    from gputui.diagnose.hang.threads import side_json

    rs = rank_stack(d)
    return {"stack": [f.label() for f in rs.frames], **side_json(rs)}


def rank_stack(d: RankDump, process: ProcessInfo | None = None) -> RankStack:
    """One rank's dump in the form a stacks record carries it: its main thread (what the
    grouping and the culprit read), its other threads (the GIL holder first, then those
    running) and its children, bounded and redacted, because it is written to files."""
    mt = main_thread(d.threads)
    frames = _safe_frames(mt.frames if mt else (), MAX_FRAMES)
    others = sorted((t for t in d.threads if t is not mt), key=lambda t: (not t.gil, not t.active))[
        :MAX_THREADS
    ]
    threads = tuple(
        ThreadStack(
            clip(t.tid, 40),
            clip(t.status, 40),
            clip(redact_text(t.name)),
            _safe_frames(t.frames, MAX_SIDE_FRAMES),
        )
        for t in others
    )
    outcome = d.result.outcome
    error = None if d.result.ok else clip(redact_text(d.result.message or str(outcome)))
    if outcome is Outcome.CANCELLED:  # gputui itself stopped: not one of the record's outcomes
        outcome, error = Outcome.FAILED, "cancelled: gputui stopped before the dump ended"
    return RankStack(
        pid=d.pid,
        rank=d.rank,
        gpu=process.gpus[0] if process is not None and process.gpus else None,
        outcome=outcome.value,
        frames=frames,
        error=error,
        thread=clip(mt.status, 40) if mt else None,
        create_time=process.create_time if process is not None else None,
        elapsed_s=d.result.elapsed_s,
        threads=threads,
        children=d.children,
    )


def _safe_frames(frames: Sequence[Frame], limit: int) -> tuple[Frame, ...]:
    return tuple(
        Frame(clip(redact_text(f.function)), clip(redact_text(f.file)), f.line)
        for f in frames[:limit]
    )
