"""The log files a rank writes besides its stderr: where its last words may be instead.

A rank's traceback is not always on its stderr. `torchrun --redirect 3` gives each rank a
stdout.log and a stderr.log, and a program that logs its error through `logging` writes it
to stdout's file; a rank that opens its own log (`logging.FileHandler("rank1.log")`) writes
there, with fd 1 and 2 on the terminal. Looked at while the rank lives (its /proc entry
goes with it), bounded: at most MAX_FDS descriptors looked at, MAX_LOGS files kept.
"""

from __future__ import annotations

import os
from typing import Any

MAX_FDS = 256
MAX_LOGS = 4
# Written files that hold no words: checkpoints, tensors, caches, databases.
_NOT_LOGS = (
    ".pt",
    ".pth",
    ".bin",
    ".ckpt",
    ".safetensors",
    ".npy",
    ".npz",
    ".pkl",
    ".db",
    ".sqlite",
    ".lock",
    ".tmp",
    ".so",
    ".arrow",
    ".parquet",
    ".h5",
    ".tfevents",
)
_LOGISH = (".log", ".err", ".out", ".txt", "stderr", "stdout")
_WRITE = 0o3  # O_WRONLY | O_RDWR in fdinfo's flags


def _writes(pid: int, fd: str) -> bool:
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}", "rb") as f:
            for ln in f.read(2048).splitlines():
                if ln.startswith(b"flags:"):
                    return bool(int(ln.split()[1], 8) & _WRITE)
    except (OSError, ValueError, IndexError):
        pass
    return False


def written_files(pid: int, stdout: Any, stderr: Any) -> tuple[str, ...]:
    """Regular files `pid` has open for writing other than its stderr's: stdout's file first
    (when stderr goes elsewhere), then files that look like logs, at most MAX_LOGS."""
    err = stderr.path if stderr.kind == "file" else None
    out: list[str] = []
    if stdout.kind == "file" and stdout.path and stdout.path != err:
        out.append(stdout.path)
    try:
        fds = sorted(os.listdir(f"/proc/{pid}/fd"), key=lambda x: int(x) if x.isdigit() else 0)
    except OSError:
        return tuple(out)
    for fd in fds[:MAX_FDS]:
        if len(out) >= MAX_LOGS or not fd.isdigit() or int(fd) < 3:
            continue
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        path = target.removesuffix(" (deleted)")
        if not path.startswith("/") or path.startswith(("/dev/", "/proc/", "/sys/")):
            continue
        low = path.lower()
        if path in out or path == err or low.endswith(_NOT_LOGS):
            continue
        if not any(k in low.rsplit("/", 1)[-1] for k in _LOGISH):
            continue
        if _writes(pid, fd):
            out.append(path)
    return tuple(out)
