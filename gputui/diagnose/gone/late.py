"""Arriving late: a rank that died before gputui started, read from what survives it.

Its own /proc entry is gone, but its words often are not: its living peers and its launcher
hold the job's output file open (`srun -o job.out`, a batch script's redirect, torchrun's
agent writing beside its ranks), torch prefixes each rank's lines with `[rankN]:`, the
elastic agent writes a record of each failure ("failed (exitcode: 1) local_rank: 1 (pid:
4242)", and at the end the "Root Cause (first observed failure)" block with its time, rank,
exit code and pid), srun says "task 1: Exited with exit code 1", torchelastic's error file
keeps the exception with a timestamp, and the kernel log keeps its Xid with the pid.

Pure: text in, facts out (gputui.tools.gather.late_words reads the files). Every parser takes
bounded, untrusted text and keeps only what matches.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

_PREFIX = re.compile(r"^\[rank(\d+)\]:\s?")
# torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 1
# (pid: 4242) of binary: /usr/bin/python3
_FAILED = re.compile(
    r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\) of (?:binary|fn)"
)
# srun: error: node-a: task 1: Exited with exit code 1 / srun: error: node-a: task 1: Killed
_SRUN = re.compile(r"srun: error: ([^:\s]+): task (\d+): (Exited with exit code (\d+)|[A-Z][\w ]+)")
_BLOCK_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: (\d+)\)")
_BLOCK_TIME = re.compile(r"^\s*time\s*:\s*(\d{4}-\d{2}-\d{2}_\d{2}:\d{2}:\d{2})")
_BLOCK_HOST = re.compile(r"^\s*host\s*:\s*(\S+)")
_BLOCK_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+) \(pid: (\d+)\)")
_BLOCK_FILE = re.compile(r"^\s*error_file\s*:\s*(\S+)")
_BLOCK_START = re.compile(r"^\s*\[\d+\]:\s*$")
MAX_EXITS = 256


@dataclass(frozen=True)
class LauncherExit:
    """A launcher's record of one rank's exit: who, how, when (None where it does not say)."""

    by: str  # "torchrun" | "srun"
    rank: int | None = None  # the global rank, where the record says it
    local_rank: int | None = None
    pid: int | None = None
    code: int | None = None
    t: float | None = None  # wall time (torchrun's Root Cause block has one)
    host: str | None = None
    error_file: str | None = None

    def words(self) -> str:
        """ "torchrun: exit code 1 (pid 4242)", "srun: exit code 1", "srun: Killed"."""
        if self.code is None:
            how = "exited"
        elif self.code < 0:
            how = f"killed by signal {-self.code}"
        else:
            how = f"exit code {self.code}"
        pid = f" (pid {self.pid})" if self.pid else ""
        return f"{self.by}: {how}{pid}"


def prefixed_lines(text: str, rank: int) -> list[str]:
    """The lines `[rankN]:` marks as this rank's, without the prefix."""
    out = []
    for ln in text.splitlines():
        m = _PREFIX.match(ln)
        if m is not None and int(m.group(1)) == rank:
            out.append(ln[m.end() :])
    return out


def strip_launcher(text: str) -> str:
    """`text` without the launcher's failure report: torchrun's "failed (exitcode ...)"
    lines, its own traceback ending in ChildFailedError, and its "FAILED / Root Cause" block;
    srun's error lines. In a file the ranks share with their agent, that report follows the
    dead rank's traceback: it is not a rank's words (it would read as its last traceback,
    and as an error of every living rank that writes there)."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if _PREFIX.match(ln):
            out.append(ln)
            i += 1
            continue
        if _FAILED.search(ln) or _SRUN.search(ln):
            i += 1
            continue
        if ln.startswith("Traceback (most recent call last):"):
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j][:1].isspace()):
                j += 1
            if j < len(lines) and "ChildFailedError" in lines[j]:
                i = j + 1  # the agent's own traceback
                continue
        if ln.startswith("====") and any(
            x.rstrip().endswith("FAILED") for x in lines[i + 1 : i + 3]
        ):
            j = i + 1
            seen_root = False
            while j < len(lines):
                seen_root = seen_root or lines[j].startswith("Root Cause")
                if lines[j].startswith("====") and seen_root:
                    break
                j += 1
            i = j + 1  # the report, through its closing line
            continue
        out.append(ln)
        i += 1
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def lines_by_rank(text: str) -> dict[int, list[str]]:
    """Every `[rankN]:` line of `text`, without its prefix, by rank: one pass over a file
    for all the ranks of a large world."""
    out: dict[int, list[str]] = {}
    for ln in text.splitlines():
        m = _PREFIX.match(ln)
        if m is not None:
            out.setdefault(int(m.group(1)), []).append(ln[m.end() :])
    return out


def has_prefixes(text: str) -> bool:
    """Whether any line carries torch's `[rankN]:` prefix."""
    return any(_PREFIX.match(ln) for ln in text.splitlines())


def last_region(text: str, rank: int | None) -> bool:
    """Whether this rank's lines (or, with `rank` None, an unprefixed traceback) end the
    file: nothing after them but blank lines and the launcher's report of the failure
    (torchrun's "failed (exitcode ...)" through its Root Cause block, srun's errors). Then
    the file's last write (its mtime) dates them."""
    lines = text.rstrip("\n").splitlines()
    end = len(lines)
    for j in range(len(lines)):  # the launcher's report: from its first line, unprefixed
        if _launcher_start(lines[j]) and not any(_PREFIX.match(x) for x in lines[j:]):
            end = j
            break
    for ln in reversed(lines[:end]):
        if not ln.strip():
            continue
        m = _PREFIX.match(ln)
        if rank is None:
            return m is None
        return m is not None and int(m.group(1)) == rank
    return False


def _launcher_start(ln: str) -> bool:
    """The first line of a launcher's failure report."""
    return bool(_FAILED.search(ln) or _SRUN.search(ln) or "ChildFailedError" in ln)


def _block_time(text: str) -> float | None:
    """torchrun's `time : 2024-05-07_10:11:12`: local time, as the agent wrote it."""
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%d_%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def launcher_exits(text: str) -> list[LauncherExit]:
    """Every exit record of torchrun's agent and srun in `text`, in order."""
    out: list[LauncherExit] = []
    block: dict[str, object] = {}

    def close_block() -> None:
        if "rank" in block:
            out.append(
                LauncherExit(
                    "torchrun",
                    rank=block.get("rank"),  # type: ignore[arg-type]
                    local_rank=block.get("local"),  # type: ignore[arg-type]
                    pid=block.get("pid"),  # type: ignore[arg-type]
                    code=block.get("code"),  # type: ignore[arg-type]
                    t=block.get("t"),  # type: ignore[arg-type]
                    host=block.get("host"),  # type: ignore[arg-type]
                    error_file=block.get("file"),  # type: ignore[arg-type]
                )
            )
        block.clear()

    for ln in text.splitlines():
        if len(out) >= MAX_EXITS:
            break
        if m := _FAILED.search(ln):
            local, pid = int(m.group(2)), int(m.group(3))
            out.append(LauncherExit("torchrun", local_rank=local, pid=pid, code=int(m.group(1))))
            continue
        if m := _SRUN.search(ln):
            status: int | None = int(m.group(4)) if m.group(4) else None
            if status is None and m.group(3).strip().lower().startswith("killed"):
                status = -9
            out.append(LauncherExit("srun", rank=int(m.group(2)), code=status, host=m.group(1)))
            continue
        if _BLOCK_START.match(ln):
            close_block()
            continue
        if m := _BLOCK_TIME.match(ln):
            close_block()
            block["t"] = _block_time(m.group(1))
        elif m := _BLOCK_HOST.match(ln):
            block["host"] = m.group(1)[:200]
        elif m := _BLOCK_RANK.match(ln):
            block["rank"], block["local"] = int(m.group(1)), int(m.group(2))
        elif m := _BLOCK_EXIT.match(ln):
            block["code"], block["pid"] = int(m.group(1)), int(m.group(2))
        elif m := _BLOCK_FILE.match(ln):
            block["file"] = m.group(1)[:1000]
        elif ln.startswith("=") and block:
            close_block()
    close_block()
    return out


def error_file_time(text: str) -> float | None:
    """torchelastic's error file: `extraInfo.timestamp` (Unix seconds, as a string)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    msg = doc.get("message") if isinstance(doc, dict) else None
    extra = msg.get("extraInfo") if isinstance(msg, dict) else None
    ts = extra.get("timestamp") if isinstance(extra, dict) else None
    try:
        t = float(ts) if isinstance(ts, (str, int, float)) and not isinstance(ts, bool) else None
    except ValueError:
        return None
    return t if t is not None and 1e9 < t < 1e11 else None


def age_words(seconds: float) -> str:
    """ "14 s ago", "14 min ago", "3 h ago": how long before gputui looked."""
    s = max(0.0, seconds)
    if s < 120:
        return f"{s:.0f} s ago"
    if s < 3 * 3600:
        return f"{s / 60:.0f} min ago"
    return f"{s / 3600:.0f} h ago"
