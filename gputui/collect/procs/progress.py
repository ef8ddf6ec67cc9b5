"""What a process has done so far, from /proc: CPU time and bytes read and written.

Why: a rank its peers wait for is either stuck or doing something slow (writing a
checkpoint, compiling, evaluating). The kernel counts both sides for free: the CPU time in
/proc/PID/stat (utime + stime) and the I/O in /proc/PID/io (read_bytes/write_bytes: what
reached the storage layer; rchar/wchar: every read() and write(), a tmpfs or a socket
included). Two readings a few seconds apart say whether it advances and at what rate.

Reading both costs two small reads per process and never blocks on the target (no ptrace,
no attach); /proc/PID/io needs the rights `ptrace` would (the same user, or root), and where
it is refused only the CPU time is known (`io` None). The judgement is elsewhere
(gputui.diagnose.hang.progress, pure); this module only reads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

try:
    _TICK = float(os.sysconf("SC_CLK_TCK"))
except (ValueError, OSError, AttributeError):  # pragma: no cover - every Linux has it
    _TICK = 100.0


@dataclass(frozen=True)
class Counters:
    """One reading of a process: wall time `t`, CPU seconds, and its I/O byte counts (None
    where /proc/PID/io could not be read)."""

    pid: int
    t: float
    cpu_s: float
    read_bytes: int | None = None
    write_bytes: int | None = None
    rchar: int | None = None
    wchar: int | None = None
    start_ticks: int | None = None  # its start time since boot: a reused pid differs
    state: str | None = None  # its state letter: R running, S sleeping, D waiting on I/O

    def to_json(self) -> list[float | int | str | None]:
        """[t, cpu_s, read_bytes, write_bytes, rchar, wchar, state]: compact for a record."""
        return [
            round(self.t, 3),
            round(self.cpu_s, 3),
            self.read_bytes,
            self.write_bytes,
            self.rchar,
            self.wchar,
            self.state,
        ]


def _stat(pid: int) -> tuple[float, int, str] | None:
    """(utime + stime in seconds, start time in ticks, state letter) from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read(4096).decode("ascii", "replace")
    except OSError:
        return None
    try:
        fields = text.rsplit(")", 1)[1].split()
        # after the comm: state(0) ppid(1) ... utime(11) stime(12) ... starttime(19)
        return (int(fields[11]) + int(fields[12])) / _TICK, int(fields[19]), fields[0][:1]
    except (IndexError, ValueError):
        return None


def _io(pid: int) -> dict[str, int] | None:
    try:
        with open(f"/proc/{pid}/io", "rb") as f:
            text = f.read(4096).decode("ascii", "replace")
    except OSError:
        return None
    out: dict[str, int] = {}
    for ln in text.splitlines():
        key, _, value = ln.partition(":")
        try:
            out[key.strip()] = int(value)
        except ValueError:
            continue
    return out


def read_counters(pid: int, t: float) -> Counters | None:
    """One reading of `pid` at wall time `t`; None when the process is gone or unreadable.

    Args:
        pid: the process.
        t: the wall time (Unix seconds) the reading is stamped with.

    Returns:
        Its Counters (CPU seconds, I/O byte counts), or None when gone or unreadable.
    """
    st = _stat(pid)
    if st is None:
        return None
    io = _io(pid) or {}
    return Counters(
        pid,
        t,
        st[0],
        io.get("read_bytes"),
        io.get("write_bytes"),
        io.get("rchar"),
        io.get("wchar"),
        st[1],
        st[2],
    )


def check_record(rec: Any) -> str | None:
    """Why a `progress` record (gputui.tools.gather.progress) is malformed, or None: for the
    recording's schema check (gputui.collect.trace.schema). The judge reads it defensively
    anyway (gputui.diagnose.hang.progress); this says what a well-formed one holds:

    {"type": "progress", "t": number, "job": str, "trigger": str, "stacks": str,
     "ranks": [{"pid": int, "rank": int|null, "gpu": int|null,
                "first": [reading], "samples": [reading, ...],   # at most 64
                "dumps": [{"t": number, "outcome": str, "moved"?: bool, "new"?: bool,
                           "frame"?: str|null, "functions"?: [str, ...],
                           "holder"?: str, "holder_frame"?: str, "holder_gil"?: bool,
                           "waits_in"?: str|null,
                           "child"?: int, "child_role"?: str, "child_frame"?: str},
                          ...],                                   # at most 16
                "error"?: str}, ...]}                             # at most 64 ranks
    where a reading is [t, cpu_s, read_bytes|null, write_bytes|null, rchar|null,
    wchar|null, state|null] (the state letter may be absent: 6 items). A dump's `new` says
    its main thread stood in code not seen before in the spin; `holder*` name the side thread
    holding the GIL while the main thread stood still; `child*` the child it waits for that
    stood in its own code. A record written before those keys reads as before.
    """
    if not isinstance(rec, dict) or rec.get("type") != "progress":
        return "not a progress record"
    ranks = rec.get("ranks")
    if not isinstance(ranks, list) or len(ranks) > 64:
        return "'ranks' must be a list of at most 64 entries"
    for e in ranks:
        if not isinstance(e, dict) or not _int(e.get("pid")):
            return "each rank needs an integer 'pid'"
        for key, limit in (("first", 1), ("samples", 64)):
            rows = e.get(key, [])
            if not isinstance(rows, list) or len(rows) > limit:
                return f"'{key}' must be a list of at most {limit} readings"
            if any(not _reading(r) for r in rows):
                return f"a reading of '{key}' is not [t, cpu_s, 4 counters, state]"
        dumps = e.get("dumps", [])
        if not isinstance(dumps, list) or len(dumps) > 16:
            return "'dumps' must be a list of at most 16"
        if any(not isinstance(d, dict) or not _number(d.get("t")) for d in dumps):
            return "each dump needs a numeric 't'"
    return None


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _reading(r: Any) -> bool:
    if not isinstance(r, list) or len(r) not in (6, 7) or not _number(r[0]):
        return False
    if not all(x is None or _number(x) for x in r[1:6]):
        return False
    return len(r) == 6 or r[6] is None or isinstance(r[6], str) and len(r[6]) <= 2
