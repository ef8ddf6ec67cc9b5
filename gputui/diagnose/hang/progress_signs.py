"""The signs the progress judge reads in a progress record (gputui.diagnose.hang.progress):
readings, byte and CPU deltas, and what the dumps say about the main thread (frames that
reach new code, a long native call, a side thread holding the GIL). Apart so that the rule
itself reads in one place; every function here reads untrusted record fields defensively.
"""

from __future__ import annotations

import re
from typing import Any

CPU_MIN = 0.25  # cores over the window, with frames that move
MAX_READINGS = 64
MAX_DUMPS = 16

_CHECKPOINT = re.compile(r"checkpoint|ckpt|save|serializ", re.I)
_COMPILE = re.compile(r"compile|inductor|dynamo|triton|autotun|codegen", re.I)
_EVAL = re.compile(r"eval|valid", re.I)
# Library functions that answer at once (a flag, a queue's size, a future's or a CUDA
# event's state): a loop that polls one stands in it half the time, so two dumps both
# catching `is_set` are a spin, never a long native call.
_POLLS = frozenset(
    {
        "is_set",
        "empty",
        "full",
        "qsize",
        "done",
        "running",
        "cancelled",
        "is_alive",
        "locked",
        "query",
        "poll",
        "exitcode",
        "ready",
        "is_completed",
    }
)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _done(dumps: list[dict[str, Any]], since: float) -> list[dict[str, Any]]:
    """The dumps that answered (outcome `done`) at or after `since`, oldest first."""
    return [d for d in dumps if d.get("outcome") == "done" and (_num(d.get("t")) or 0.0) >= since]


def _readings(e: dict[str, Any], key: str = "samples") -> list[list[float | None]]:
    """[t, cpu_s, read_bytes, write_bytes, rchar, wchar] of each reading, oldest first."""
    out = []
    raw = e.get(key)
    for r in raw[:MAX_READINGS] if isinstance(raw, list) else ():
        if isinstance(r, list) and len(r) in (6, 7) and _num(r[0]) is not None:
            out.append([_num(x) for x in r[:6]])
    return sorted(out, key=lambda r: r[0] or 0.0)


def _flushing(e: dict[str, Any]) -> bool:
    """Its last reading found it waiting on I/O in the kernel (state D): a checkpoint's
    final sync or fsync, whose bytes the kernel's own threads write, not the rank."""
    raw = e.get("samples")
    rows = [
        r
        for r in (raw[:MAX_READINGS] if isinstance(raw, list) else ())
        if isinstance(r, list) and r
    ]
    last = max(rows, key=lambda r: _num(r[0]) or 0.0, default=None) if rows else None
    return last is not None and len(last) == 7 and last[6] == "D"


def _delta(a: list[float | None], b: list[float | None], *idx: int) -> float:
    """The largest advance among the counters at `idx` (a counter unknown at either end,
    or going back, counts 0)."""
    best = 0.0
    for i in idx:
        x, y = a[i], b[i]
        if x is not None and y is not None and y > x:
            best = max(best, y - x)
    return best


def _rate_words(bytes_per_s: float) -> str:
    mb = bytes_per_s / 1e6
    return f"{mb:.0f} MB/s" if mb >= 10 else f"{mb:.1f} MB/s"


def _dumps(e: dict[str, Any]) -> list[dict[str, Any]]:
    raw = e.get("dumps")
    out = [d for d in (raw[:MAX_DUMPS] if isinstance(raw, list) else ()) if isinstance(d, dict)]
    return [d for d in out if _num(d.get("t")) is not None]


def _strs(v: Any) -> list[str]:
    """The strings of a list from a record (anything else: none)."""
    return [x[:200] for x in v[:64] if isinstance(x, str)] if isinstance(v, list) else []


def _text(v: Any, limit: int = 300) -> str | None:
    return v[:limit] if isinstance(v, str) and v else None


def _cores(cpu: float) -> str:
    return f"{cpu:.1f} core{'s' if round(cpu, 1) != 1.0 else ''}"


def _stirred(dumps: list[dict[str, Any]], since: float, names: str) -> bool:
    """Frames that change as proof of progress: the main thread's innermost user function is
    one it never stood in before in this spin (`new`) at the last dump, or at more than half
    the window's dumps. A loop polling a flag stays in its own function: a hang, however
    hard it spins. A known long phase (compile, autotune,
    evaluation, save, load) whose frames move is enough. A record written before `new` was
    kept has only `moved`: read as before."""
    recent = [d for d in dumps if d.get("outcome") in ("done", None)]
    recent = [d for d in recent if (_num(d.get("t")) or 0.0) >= since]
    if not recent:
        return False
    moved = any(d.get("moved") is True for d in recent)
    if not any("new" in d for d in recent):
        return moved
    if moved and (_COMPILE.search(names) or _EVAL.search(names) or _CHECKPOINT.search(names)):
        return True
    new = [d.get("new") is True for d in recent]
    return new[-1] or 2 * sum(new) > len(new)


def _held(dumps: list[dict[str, Any]], since: float) -> tuple[str, str, bool, str | None] | None:
    """(thread, frame, holds the GIL, the collective its main thread waits in) when the last
    two dumps in the window found the same side thread at the same frame keeping the main
    thread, which stood still, from running."""
    done = _done(dumps, since)
    if len(done) < 2:
        return None
    a, b = done[-2:]
    name, frame = _text(b.get("holder"), 120), _text(b.get("holder_frame"))
    if name is None or frame is None or b.get("moved") is True:
        return None
    if (_text(a.get("holder"), 120), _text(a.get("holder_frame"))) != (name, frame):
        return None
    return name, frame, b.get("holder_gil") is True, _text(b.get("waits_in"), 60)


def _in_native_work(dumps: list[dict[str, Any]], since: float) -> str | None:
    """The library function a rank's main thread stood in at its last two dumps (in the
    window, the same functions both times), when that is not its own code: a long native
    call (torch.save of 16 GiB spent its first seconds in one CRC, on 4 x H200). A loop in
    the rank's own code (`while True: pass`) has its own function innermost: None, and so
    has one that polls a library's flag (`while not ev.is_set(): pass`, `_POLLS`)."""
    done = _done(dumps, since)
    if len(done) < 2 or any(d.get("moved") for d in done[-2:]):
        return None
    a, b = (_strs(d.get("functions")) for d in done[-2:])
    if not b or a != b:
        return None
    frame = _text(done[-1].get("frame"))
    own = frame.split(" (", 1)[0] if frame else None
    polls = b[0].rsplit(".", 1)[-1] in _POLLS  # py-spy names it `Event.is_set`
    return None if own is None or b[0] == own or polls else b[0]


def _stuck_words(cpu: float, dumps: list[dict[str, Any]], since: float) -> str:
    """Why a rank is not advancing, in words that do not change at every reading."""
    recent = [d for d in dumps if (_num(d.get("t")) or 0.0) >= since]
    if not recent:
        return "no bytes read or written; CPU time alone is not progress (its stack is unknown)"
    if cpu >= CPU_MIN:
        return (
            "no bytes read or written, and it burns CPU with its stack standing still: a "
            "busy-wait loop, not progress"
        )
    return "no bytes read or written, no CPU time to speak of, its stack stands still"


def _child(dumps: list[dict[str, Any]], since: float) -> tuple[str, int, str, str | None] | None:
    """(role, pid, frame, the rank's own line) of the child its main thread waits for, when
    the last two dumps in the window found the same child stuck at the same frame (one dump
    may catch a healthy worker in its dataset's code)."""
    done = _done(dumps, since)
    if len(done) < 2:
        return None
    a, b = done[-2:]
    pid, frame, role = b.get("child"), _text(b.get("child_frame")), _text(b.get("child_role"), 120)
    if not isinstance(pid, int) or isinstance(pid, bool) or frame is None or role is None:
        return None
    if (a.get("child"), _text(a.get("child_frame"))) != (pid, frame):
        return None
    return role, pid, frame, _text(b.get("frame"))
