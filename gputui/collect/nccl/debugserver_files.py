"""The debug server's periodic dumps on disk: found newest first, opened as the job's user's.

The directory is named by the job (an environment variable, an argument), so what is in it
is the job's user's to choose: a dump is opened without following a link and must be that
user's own regular file, or root would read (and show in a verdict) a file the job's user
could not.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DUMPS_TRIED = 8  # newest dumps read, looking for one in which some rank answered


def newest_dumps(directory: str, n: int = DUMPS_TRIED) -> list[tuple[Path, float]]:
    """The newest `stacks_*.txt` files in `directory` with their modification times,
    newest first (at most `n`; empty when it cannot be read)."""
    found: list[tuple[Path, float]] = []
    try:
        with os.scandir(directory) as it:
            for i, entry in enumerate(it):
                if i > 100_000:
                    break
                if not (entry.name.startswith("stacks_") and entry.name.endswith(".txt")):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_file(follow_symlinks=False):
                    found.append((Path(entry.path), st.st_mtime))
    except OSError:
        return []
    return sorted(found, key=lambda f: -f[1])[:n]


def open_dump(path: Path, owner: int | None) -> int:
    """A descriptor on a dump: never through a link (O_NOFOLLOW), a regular file, and
    `owner`'s when given (what the job's user could read anyway)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    st = os.fstat(fd)
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = "not a regular file"
    elif owner is not None and st.st_uid != owner:
        why = f"owned by uid {st.st_uid}, not the job's user {owner}"
    if why is not None:
        os.close(fd)
        raise OSError(f"{path.name}: {why}")
    return fd


def job_uid(ranks: Sequence[Any]) -> int | None:
    import psutil

    for p in ranks[:8]:
        try:
            return int(psutil.Process(p.pid).uids().real)
        except (psutil.Error, AttributeError):
            continue
    return None
