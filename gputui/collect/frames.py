"""Stack data shared by the tools that take stacks and the diagnosis that reads them.

Why here, below both: reading a culprit out of stacks is pure diagnosis over data, and
running py-spy is a tool (docs/architecture.md, the layers). `gputui.tools` parses py-spy's
text into these types; `gputui.diagnose` reads them and never imports tools. A rank's stack
also travels through recordings (a `{"type": "stacks"}` record), so its JSON form lives here
too, with the validation a record from an untrusted file needs: the reader checks only the
envelope of typed records, their consumers check the body.

Frames are innermost first, as py-spy prints them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Bounds on a stacks record's body. A node has at most a few dozen local ranks; a deep
# Python stack is ~100 frames, but the culprit is in the innermost few dozen and a record
# must stay small enough to sit in a recording line (8 ranks x 64 frames ~ 40 KB; with 8
# other threads and 8 children of 24 frames each, ~200 KB: far below a line's 8 MiB).
MAX_RANKS = 256
MAX_FRAMES = 64
MAX_TEXT = 300  # characters of a function name, file name or error message
MAX_THREADS = 8  # a rank's other threads kept in a record (the GIL holder first, then running)
MAX_CHILDREN = 8  # a rank's children kept in a record (DataLoader workers, spawn children)
MAX_SIDE_FRAMES = 24  # frames of another thread or a child: its innermost user code is near

# Names of the calls a rank waits in when its peers do not arrive. Matched against the last
# component of a function name (py-spy 0.4 prints `Class.method`). Native names cover
# `py-spy --native` stacks (cuCtxSynchronize, ncclGroupEnd).
_COLLECTIVE = re.compile(
    r"^(all_reduce\w*|allreduce\w*|all_gather\w*|allgather\w*|reduce_scatter\w*|"
    r"all_to_all\w*|alltoall\w*|broadcast\w*|barrier|monitored_barrier|synchronize|reduce|"
    r"gather\w*|scatter\w*|recv\w*|send\w*|irecv|isend|batch_isend_irecv|wait_stream|"
    r"cuCtxSynchronize\w*|cudaDeviceSynchronize|cudaStreamSynchronize|ncclGroupEnd)$"
)
# The names a person recognises, for the words: all_reduce, broadcast, send/recv...
_CANONICAL = (
    ("all_reduce", re.compile(r"^(all_?reduce)", re.I)),
    ("reduce_scatter", re.compile(r"^reduce_scatter", re.I)),
    ("all_gather", re.compile(r"^all_?gather", re.I)),
    ("all_to_all", re.compile(r"^all_?to_?all", re.I)),
    ("broadcast", re.compile(r"^broadcast", re.I)),
    ("barrier", re.compile(r"^(monitored_)?barrier$")),
    ("send/recv", re.compile(r"^(i?send|i?recv|batch_isend_irecv)")),
    ("synchronize", re.compile(r"(synchronize|wait_stream|ncclGroupEnd)", re.I)),
)


@dataclass(frozen=True)
class Frame:
    """One frame: `train_step (train.py:21)`; native frames may have no line."""

    function: str
    file: str
    line: int | None

    def label(self) -> str:
        if self.line:
            return f"{self.function} ({self.file}:{self.line})"
        return f"{self.function} ({self.file})"

    def site(self) -> str:
        """`train.py:21`, the place without the function."""
        return f"{self.file}:{self.line}" if self.line else self.file

    @property
    def native(self) -> bool:
        """A frame py-spy --native adds: a bare address, or a shared library without a line."""
        return self.function.startswith("0x") or self.line is None

    def to_json(self) -> list[Any]:
        return [self.function, self.file, self.line]

    @classmethod
    def from_json(cls, v: Any) -> Frame:
        if not isinstance(v, list) or len(v) != 3:
            raise ValueError("a frame is [function, file, line]")
        func, file, line = v
        if line is not None and (isinstance(line, bool) or not isinstance(line, int)):
            raise ValueError("a frame's line is an integer or null")
        if line is not None and not 0 <= line < 10_000_000:
            raise ValueError("a frame's line is out of range")
        return cls(_text(func, "function"), _text(file, "file"), line)


@dataclass(frozen=True)
class ThreadStack:
    tid: str
    status: str  # py-spy's words: active, idle, active+gil...
    name: str  # the thread's Python name, "MainThread" for the main thread
    frames: tuple[Frame, ...]

    @property
    def gil(self) -> bool:
        """It held the GIL when py-spy looked (`active+gil`): no other thread runs Python."""
        return "gil" in self.status.split("+")

    @property
    def active(self) -> bool:
        """On a CPU, or runnable, when py-spy looked (not waiting in a lock or a syscall)."""
        return "active" in self.status.split("+")

    def to_json(self) -> dict[str, Any]:
        return {
            "tid": self.tid,
            "name": self.name,
            "status": self.status,
            "frames": [f.to_json() for f in self.frames[:MAX_SIDE_FRAMES]],
        }

    @classmethod
    def from_json(cls, d: Any) -> ThreadStack:
        if not isinstance(d, dict):
            raise ValueError("a thread is an object")
        frames = _list(d.get("frames"), "a thread's frames", MAX_SIDE_FRAMES)
        return cls(
            tid=_text(str(d.get("tid", ""))[:40], "tid"),
            status=_text(d.get("status", ""), "status")[:40],
            name=_text(d.get("name", ""), "name"),
            frames=tuple(Frame.from_json(f) for f in frames),
        )


@dataclass(frozen=True)
class ChildStack:
    """A child process of a rank (a DataLoader worker, a spawn child, a compile worker), as
    a stacks record carries it: its role in words, and where its main thread stands."""

    pid: int
    role: str  # "DataLoader worker 1", "spawn child", "child"
    outcome: str  # one of OUTCOMES
    frames: tuple[Frame, ...] = ()  # its main thread's, innermost first
    status: str | None = None  # py-spy's words for its main thread
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "role": self.role,
            "outcome": self.outcome,
            "frames": [f.to_json() for f in self.frames[:MAX_SIDE_FRAMES]],
            "status": self.status,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, d: Any) -> ChildStack:
        if not isinstance(d, dict):
            raise ValueError("a child is an object")
        outcome = d.get("outcome")
        if outcome not in OUTCOMES:
            raise ValueError(f"a child's outcome {str(outcome)[:20]!r} is unknown")
        frames = _list(d.get("frames"), "a child's frames", MAX_SIDE_FRAMES)
        pid = _int(d.get("pid"), "pid", 1, 1 << 22)
        if pid is None:
            raise ValueError("a child needs its pid")
        status, error = d.get("status"), d.get("error")
        return cls(
            pid=pid,
            role=_text(d.get("role"), "role"),
            outcome=outcome,
            frames=tuple(Frame.from_json(f) for f in frames),
            status=None if status is None else _text(status, "status"),
            error=None if error is None else _text(error, "error"),
        )


def main_thread(threads: Sequence[ThreadStack]) -> ThreadStack | None:
    """The thread a training loop runs in; py-spy lists it first when no name is known.

    Args:
        threads: one process's threads, as py-spy listed them.

    Returns:
        The thread named MainThread, else py-spy's first; None when there are no threads.
    """
    for t in threads:
        if t.name == "MainThread":
            return t
    return threads[0] if threads else None


def collective_name(f: Frame) -> str | None:
    """The collective a frame is (`all_reduce`, `broadcast`, `synchronize`...), or None.

    Args:
        f: one frame of a Python or native stack.

    Returns:
        The collective's name (`all_reduce`, `barrier`, `synchronize`...), or None when the frame is
        in none.
    """
    base = f.function.rsplit(".", 1)[-1]
    if not _COLLECTIVE.match(base):
        return None
    for name, rx in _CANONICAL:
        if rx.search(base):
            return name
    return base


OUTCOMES = ("done", "gone", "permission", "missing", "timeout", "failed", "refused")


@dataclass(frozen=True)
class RankStack:
    """One local rank's dump, as a stacks record carries it: where its main thread stands,
    or why there is no stack (`outcome` and an `error` that says what to do)."""

    pid: int | None
    rank: int | None
    gpu: int | None
    outcome: str  # one of OUTCOMES
    frames: tuple[Frame, ...] = ()  # the main thread's, innermost first
    error: str | None = None
    thread: str | None = None  # py-spy's status of the main thread (active, idle)
    create_time: float | None = None
    elapsed_s: float | None = None
    # Its other threads (the GIL holder first) and its children; a record written before
    # they were kept has neither, and reads as a rank with only its main thread.
    threads: tuple[ThreadStack, ...] = ()
    children: tuple[ChildStack, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome == "done"

    def who(self) -> str:
        """`rank 1 (pid 908)`, `pid 908`, or `local rank on GPU 1` when nothing else is known."""
        if self.rank is not None and self.pid is not None:
            return f"rank {self.rank} (pid {self.pid})"
        if self.rank is not None:
            return f"rank {self.rank}"
        if self.pid is not None:
            return f"pid {self.pid}"
        return f"the rank on GPU {self.gpu}" if self.gpu is not None else "a rank"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "pid": self.pid,
            "rank": self.rank,
            "gpu": self.gpu,
            "outcome": self.outcome,
            "frames": [f.to_json() for f in self.frames[:MAX_FRAMES]],
            "error": self.error,
        }
        if self.thread is not None:
            d["thread"] = self.thread
        if self.create_time is not None:
            d["create_time"] = self.create_time
        if self.elapsed_s is not None:
            d["elapsed_s"] = round(self.elapsed_s, 4)
        if self.threads:
            d["threads"] = [t.to_json() for t in self.threads[:MAX_THREADS]]
        if self.children:
            d["children"] = [c.to_json() for c in self.children[:MAX_CHILDREN]]
        return d

    @classmethod
    def from_json(cls, d: Any) -> RankStack:
        """Raises ValueError on anything a stacks record written by gputui would not hold."""
        if not isinstance(d, dict):
            raise ValueError("a rank entry is an object")
        outcome = d.get("outcome")
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {str(outcome)[:20]!r}")
        frames = _list(d.get("frames"), "frames", MAX_FRAMES)
        error = d.get("error")
        thread = d.get("thread")
        threads = _list(d.get("threads"), "threads", MAX_THREADS)
        children = _list(d.get("children"), "children", MAX_CHILDREN)
        return cls(
            pid=_int(d.get("pid"), "pid", 1, 1 << 22),
            rank=_int(d.get("rank"), "rank", 0, 1 << 24),
            gpu=_int(d.get("gpu"), "gpu", 0, 1 << 16),
            outcome=outcome,
            frames=tuple(Frame.from_json(f) for f in frames),
            error=None if error is None else _text(error, "error"),
            thread=None if thread is None else _text(thread, "thread"),
            create_time=_float(d.get("create_time"), "create_time"),
            elapsed_s=_float(d.get("elapsed_s"), "elapsed_s"),
            threads=tuple(ThreadStack.from_json(t) for t in threads),
            children=tuple(ChildStack.from_json(c) for c in children),
        )


def rank_stacks_of_record(record: dict[str, Any]) -> tuple[RankStack, ...]:
    """The rank entries of a `{"type": "stacks"}` record; ValueError when the body is bad.

    Args:
        record: a `stacks` record, as written or as read back from a recording.

    Returns:
        One RankStack per rank entry, in the record's order.

    Raises:
        ValueError: an entry that gputui would not have written.
    """
    ranks = record.get("ranks")
    if not isinstance(ranks, list) or len(ranks) > MAX_RANKS:
        raise ValueError(f"'ranks' must be a list of at most {MAX_RANKS} entries")
    return tuple(RankStack.from_json(r) for r in ranks)


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """A string short enough for a record (tool messages can be long).

    Args:
        text: a message or a line of a tool's output.
        limit: the most characters kept.

    Returns:
        `text` itself, or its first `limit` - 3 characters and `...`.
    """
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text(v: Any, what: str) -> str:
    if not isinstance(v, str) or len(v) > MAX_TEXT:
        raise ValueError(f"{what}: a string of at most {MAX_TEXT} characters")
    return v


def _list(v: Any, what: str, most: int) -> list[Any]:
    """A list field of a record (absent or null: empty), bounded so a forged record cannot
    make the reader build millions of frames."""
    v = v or []
    if not isinstance(v, list) or len(v) > most:
        raise ValueError(f"{what}: a list of at most {most}")
    return v


def _int(v: Any, what: str, lo: int, hi: int) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v < hi:
        raise ValueError(f"{what}: an integer in [{lo}, {hi})")
    return v


def _float(v: Any, what: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"{what}: a finite number >= 0")
    return float(v)
