"""Where each rank writes, remembered while it is alive, and a bounded tail of its log.

Why while alive: once a rank has exited, /proc/PID is gone, and with it the only record of
where its stdout and stderr went. So every few seconds (never on the UI thread) the ranks of
jobs are looked at, and a rank not known yet at the first sample that lists it (it may die 3 s
later): fd 1 and fd 2 (a file, a pipe, a tty, a socket), TORCHELASTIC_ERROR_FILE from the
environment, the cwd, RLIMIT_CORE and the node's core_pattern. For a file, a tail is kept as
it grows: its size is checked, and only when it changed are the last bytes read (64 KiB at
most). Another process's pipe cannot be read: the
process holding its other end (the launcher) is named instead, so the person knows where
to look.

When a rank is gone, `final()` reads its file once more (the traceback is written in the
last moment before the exit, after the last refresh). The tracker that does the looking is
gputui.collect.procs.rank_tracker; what it looks at, and how, is here.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

TAIL_MAX = 64 * 1024  # bytes of a log file read at most, ever
RECORD_TAIL = 16 * 1024  # bytes of it kept in a record (recordings stay small)
CORE_PATTERN = "/proc/sys/kernel/core_pattern"
_PIPE = re.compile(r"^(pipe|socket):\[(\d+)\]$")


@dataclass(frozen=True)
class Stream:
    """Where one fd goes: kind is file, pipe, tty, socket, null, other or unknown."""

    kind: str
    path: str | None = None  # the file or device
    holder: str | None = None  # a pipe's other end: `torchrun (pid 12)`

    def words(self) -> str:
        if self.kind == "file":
            return f"a file ({self.path})"
        if self.kind == "pipe":
            return f"a pipe to {self.holder}" if self.holder else "a pipe"
        if self.kind == "tty":
            return f"a terminal ({self.path})"
        if self.kind == "socket":
            return f"a socket to {self.holder}" if self.holder else "a socket"
        if self.kind == "null":
            return "/dev/null"
        return self.path or self.kind

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "holder": self.holder}

    @classmethod
    def from_json(cls, d: Any) -> Stream:
        if not isinstance(d, dict):
            return cls("unknown")

        def s(k: str) -> str | None:
            v = d.get(k)
            return v[:500] if isinstance(v, str) else None

        return cls(s("kind") or "unknown", s("path"), s("holder"))


@dataclass(frozen=True)
class RankIO:
    """What is known of where one rank writes, and the tail of its log file."""

    pid: int
    create_time: float | None
    rank: int | None
    job: str | None
    stdout: Stream = Stream("unknown")
    stderr: Stream = Stream("unknown")
    cwd: str | None = None
    error_file: str | None = None  # TORCHELASTIC_ERROR_FILE
    core_limit: str | None = None  # RLIMIT_CORE soft limit: "0", "unlimited", bytes
    tail: bytes = b""
    tail_path: str | None = None
    size: int = -1  # the log file's size at the last read
    seen: float = 0.0  # when it was last seen alive
    error: str | None = None  # why /proc could not be read
    # Its user: files it names are read as that user could (gputui.collect.safe_open).
    uid: int | None = None
    gids: tuple[int, ...] = ()
    # Other files it writes: stdout's when stderr goes elsewhere, a logging.FileHandler's
    # file (gputui.collect.procs.writes); read once more when it is gone.
    logs: tuple[str, ...] = ()

    @property
    def owner(self) -> tuple[int | None, tuple[int, ...]]:
        return self.uid, self.gids

    def log_path(self) -> str | None:
        """The file to read: stderr's (tracebacks go there), else stdout's."""
        for s in (self.stderr, self.stdout):
            if s.kind == "file" and s.path:
                return s.path
        return None


def read_tail(
    path: str,
    last_size: int = -1,
    limit: int = TAIL_MAX,
    owner: tuple[int | None, tuple[int, ...]] | None = None,
) -> tuple[int, bytes] | None:
    """(size, last bytes) of a regular file, or None when its size has not changed (nothing
    new to read) or it cannot be read. Never more than `limit` bytes; a file truncated or
    rotated while read simply gives what is there now. `owner`: (uid, groups) of the process
    that named the file: opened as that user could, never through a link
    (gputui.collect.safe_open); None: the caller's own file, opened plainly.

    Args:
        path: the file.
        last_size: its size at the last read (-1: never read).
        limit: the most bytes read from its end.
        owner: (uid, groups) of the process that named the file; None: the caller's own file.

    Returns:
        (size, last bytes), or None when the size has not changed or the file cannot be read.
    """
    try:
        if owner is None:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        else:
            from gputui.collect.safe_open import open_for

            fd = open_for(path, *owner)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None  # a fifo or a device: reading could block or never end
        if st.st_size == last_size:
            return None
        start = max(0, st.st_size - limit)
        os.lseek(fd, start, os.SEEK_SET)
        data = os.read(fd, limit)
        if start > 0:  # the first line is cut: drop it
            nl = data.find(b"\n")
            data = data[nl + 1 :] if 0 <= nl < len(data) - 1 else data
        return st.st_size, data
    except OSError:
        return None
    finally:
        os.close(fd)


def core_pattern(path: str = CORE_PATTERN) -> str | None:
    """The kernel's core_pattern: where a crashed rank's core file goes (or the program it is piped
    to).

    Args:
        path: the file to read (/proc/sys/kernel/core_pattern; tests pass another).

    Returns:
        The pattern, or None when it cannot be read.
    """
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None


def core_limit(pid: int) -> str | None:
    """The soft RLIMIT_CORE of a process, from /proc/PID/limits."""
    try:
        with open(f"/proc/{pid}/limits", "rb") as f:
            text = f.read(8192).decode("ascii", "replace")
    except OSError:
        return None
    for ln in text.splitlines():
        if ln.startswith("Max core file size"):
            parts = ln.split()
            return parts[4] if len(parts) > 4 else None
    return None


def _inode_holders(inode: str, pids: Iterable[int], me: int) -> str | None:
    """The first of `pids` (other than `me`) holding the pipe or socket `inode`."""
    want = f":[{inode}]"
    for pid in pids:
        if pid == me or pid <= 0:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds[:4096]:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").endswith(want):
                    return f"{program_name(pid)} (pid {pid})"
            except OSError:
                continue
    return None


def program_name(pid: int) -> str:
    """The program's name: torchrun shows as python3 in comm, so the command line says it.

    Args:
        pid: the process.

    Returns:
        The launcher's name (`torchrun`, `srun`, `mpirun`...) when its command line shows one, else
        argv[0]'s basename; `?` when unreadable.
    """
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read(4096).split(b"\0") if a]
    except OSError:
        argv = []
    for a in argv[:3]:
        base = a.rsplit("/", 1)[-1]
        if base in ("torchrun", "mpirun", "srun", "deepspeed", "accelerate") or a in (
            "torch.distributed.run",
            "torch.distributed.launch",
        ):
            return "torchrun" if a.startswith("torch.") else base
    if argv:
        return argv[0].rsplit("/", 1)[-1][:40]
    return "?"


def ancestors(pid: int, n: int = 3) -> list[int]:
    """A process's parent, grandparent... from /proc/PID/stat: who may hold the other end of its
    pipe.

    Args:
        pid: the process.
        n: the most generations read.

    Returns:
        Their pids, nearest first, stopping before init (pid 1) or where /proc cannot be read.
    """
    out = []
    for _ in range(n):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                text = f.read(4096).decode("ascii", "replace")
            pid = int(text.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
        out.append(pid)
    return out


def stream(pid: int, fd: int) -> Stream:
    """Where fd `fd` of `pid` goes, and for a pipe who holds the other end.

    Args:
        pid: the process.
        fd: one of its file descriptors (1, 2...).

    Returns:
        A Stream: a file (its path), a pipe (who holds its other end), a tty, a socket,
        /dev/null, other or unknown.
    """
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return Stream("unknown")
    m = _PIPE.match(target)
    if m is not None:
        kind, inode = m.group(1), m.group(2)
        return Stream(kind, target, _inode_holders(inode, ancestors(pid), pid))
    if target == "/dev/null":
        return Stream("null", target)
    if target.startswith(("/dev/pts/", "/dev/tty")) or target == "/dev/console":
        return Stream("tty", target)
    if target.startswith("/"):
        path = target.removesuffix(" (deleted)")
        return Stream("file", path)
    return Stream("other", target)


def _env_value(pid: int, name: str) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return None
    key = name.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(key):
            return item[len(key) :].decode("utf-8", "replace")[:4096] or None
    return None


def resolve(pid: int, create_time: float | None, rank: int | None, job: str | None) -> RankIO:
    """Everything about where a live rank writes (no tail yet).

    Args:
        pid: the rank's pid.
        create_time: its start time (a reused pid is another process).
        rank: its rank, when known.
        job: its job's key, when known.

    Returns:
        A RankIO: its stdout and stderr streams, log files and error file, without tails.
    """
    try:
        cwd: str | None = os.readlink(f"/proc/{pid}/cwd")
    except OSError as e:
        cwd = None
        if not os.path.exists(f"/proc/{pid}"):
            return RankIO(pid, create_time, rank, job, error="its process has exited")
        err = f"/proc/{pid} not readable ({e.strerror}): run gputui as the job's user or root"
        return RankIO(pid, create_time, rank, job, error=err)
    from gputui.collect.procs.writes import written_files
    from gputui.collect.safe_open import owner_of

    uid, gids = owner_of(pid)
    out, err_ = stream(pid, 1), stream(pid, 2)
    return RankIO(
        pid,
        create_time,
        rank,
        job,
        stdout=out,
        stderr=err_,
        cwd=cwd,
        error_file=_env_value(pid, "TORCHELASTIC_ERROR_FILE"),
        core_limit=core_limit(pid),
        seen=time.time(),
        uid=uid,
        gids=gids,
        logs=written_files(pid, out, err_),
    )


def refresh_tail(io: RankIO) -> RankIO:
    """The tail read again if the file changed. A file already deleted (a temporary file, a
    rotated log) is read through /proc/PID/fd while the rank is alive.

    Args:
        io: what is known of where a rank writes, with its last tail.

    Returns:
        The same RankIO with its tail read again when the file changed.
    """
    path = io.log_path()
    if path is None:
        return io
    last = io.size if io.tail_path == path else -1
    fd = 2 if io.stderr.kind == "file" else 1
    for where in (path, f"/proc/{io.pid}/fd/{fd}"):
        if where.startswith("/proc/") and not alive(io.pid, io.create_time):
            break  # its pid may be another process's now
        if os.path.lexists(where):
            got = read_tail(where, last, owner=io.owner)
            if got is None:
                return io  # unchanged, or unreadable
            size, data = got
            return replace(io, tail=data, tail_path=path, size=size)
    return io


def alive(pid: int, create_time: float | None) -> bool:
    """Whether `pid` is still the same process (a reused pid is another process).

    Args:
        pid: the process's pid.
        create_time: its start time when first seen; None: any process with that pid.

    Returns:
        True when a process with that pid and start time still runs.
    """
    try:
        import psutil

        p = psutil.Process(pid)
        if create_time is None:
            return p.is_running()
        return abs(p.create_time() - create_time) < 0.5 and p.status() != "zombie"
    except Exception:
        return False
