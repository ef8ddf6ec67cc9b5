"""Open a file a job's user controls as that user could, never through a link they planted.

gputui often runs as root, and reads files whose paths a job's ranks chose: their log files,
torchelastic's error file named in their environment, their launcher's output. A rank run as
another user can replace its log file with a symbolic link to a root-only file and then die;
following the link, root would quote that file's lines as the rank's last words. So a file
named by a process of another user is opened:

- component by component from "/", each directory with O_NOFOLLOW (`openat` from the
  directory's handle), the last one with O_NOFOLLOW: a link anywhere on the path is refused;
- and kept only when its user could read it (owner, group or other bits for that uid and its
  groups), each directory on the way searchable by it too.

When gputui runs as the process's own user, the kernel's checks are the same as the user's
and the file is opened plainly. `/proc/PID/fd/N` (a deleted log read while its rank lives) is
a link by nature: it is opened as is, and kept only when the user could read what it opened.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
READ, SEARCH = 4, 1


def owner_of(pid: int) -> tuple[int | None, tuple[int, ...]]:
    """(effective uid, groups) of a process from /proc/PID/status; (None, ()) when unknown."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            text = f.read(16384).decode("ascii", "replace")
    except OSError:
        return None, ()
    uid: int | None = None
    gids: list[int] = []
    for ln in text.splitlines():
        key, _, rest = ln.partition(":")
        vals = rest.split()
        try:
            if key == "Uid" and len(vals) > 1:
                uid = int(vals[1])
            elif key == "Gid" and len(vals) > 1:
                gids.append(int(vals[1]))
            elif key == "Groups":
                gids.extend(int(v) for v in vals[:64])
        except ValueError:
            continue
    return uid, tuple(dict.fromkeys(gids))


def may(st: os.stat_result, uid: int, gids: Iterable[int], bit: int) -> bool:
    """Whether `uid` (in groups `gids`) has permission `bit` (READ, SEARCH) on a file."""
    if uid == 0:
        return True
    mode = st.st_mode
    if st.st_uid == uid:
        return bool(mode & (bit << 6))
    if st.st_gid in set(gids):
        return bool(mode & (bit << 3))
    return bool(mode & bit)


def open_for(path: str, uid: int | None, gids: Iterable[int] = ()) -> int:
    """A read-only, non-blocking fd of `path` as `uid` may have it (see the module's
    docstring); OSError when it is a link, under one, or that user could not read it.
    `uid` None (unknown): links are refused; as root, a root-owned file only when anyone
    could read it."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    me = os.geteuid()
    if uid is not None and uid == me:
        return os.open(path, flags)
    groups = tuple(gids)
    if path.startswith("/proc/"):
        fd = os.open(path, flags)
        _check(fd, uid, groups, READ)
        return fd
    if not path.startswith("/"):
        raise OSError(f"not an absolute path: {path[:200]}")
    parts = [p for p in path.split("/") if p and p != "."]
    if not parts:
        raise IsADirectoryError(path)
    dfd = os.open("/", _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            nfd = os.open(name, _O_PATH | os.O_DIRECTORY | _O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
            os.close(dfd)
            dfd = nfd
            if uid is not None:  # an unknown user's: the final file's check is the one
                _check(dfd, uid, groups, SEARCH)
        fd = os.open(parts[-1], flags | _O_NOFOLLOW, dir_fd=dfd)
    finally:
        os.close(dfd)
    _check(fd, uid, groups, READ)
    return fd


def _check(fd: int, uid: int | None, gids: tuple[int, ...], bit: int) -> None:
    st = os.fstat(fd)
    if uid is None:
        # Whose it is is unknown (a gone rank's file named by a record): as root, only what
        # anyone could read, or a file a user other than root owns.
        ok = os.geteuid() != 0 or st.st_uid != 0 or bool(st.st_mode & bit)
    else:
        ok = may(st, uid, gids, bit)
    if not ok:
        if bit == READ:
            os.close(fd)
        who = "its user" if uid is None else f"uid {uid}"
        raise PermissionError(f"{who} could not {'read' if bit == READ else 'search'} it")


def is_regular(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)
