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
    """The side thread that holds the GIL (or, the main thread idle, runs Python in user
    code), when the main thread is not the one running; else None."""
    if not threads:
        return None
    best = next((t for t in threads if t.gil and t.frames), None)
    if best is None:
        best = next((t for t in threads if t.active and _has_user_frame(t.frames)), None)
        if best is None:
            return None
    frame = read_stack(best.frames).frame
    if frame is None:
        return None
    if not best.gil and is_library(frame):
        return None  # an active library thread (a feeder, a watchdog) blocks nobody
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
