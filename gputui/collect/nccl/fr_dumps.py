"""The flight recorder's dumps: asked for through each rank's pipe, waited for, copied safely.

Each rank makes a FIFO `<TORCH_NCCL_DEBUG_INFO_PIPE_FILE><rank>.pipe`; writing to it makes
that rank dump its recent collectives to `<prefix><rank>` while training goes on (6.4 s on
the GPU image). The dumps are pickles: gputui never unpickles them, it copies them into a
private directory for PyTorch's analyzer (gputui.collect.nccl.flightrec).

The job's user names the dump paths, so they are hostile input to root: a dump is opened
without following a link (O_NOFOLLOW, then fstat on the open file) and must be a regular file
owned by the job's user (what that user could read anyway: a link or a hard link to a
root-only file is refused, never copied and handed to that user). A pipe is written only
when it is a FIFO, never blocking; the wait is bounded and cancellable.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import threading
import time
from collections.abc import Mapping

from gputui.redact import redact_text

STAGED_PREFIX = "gputui_fr_rank_"  # the dumps' names in gputui's private directory
MAX_DUMP_BYTES = 256 << 20
_POLL_S = 0.25


def trigger(pipe: str) -> str:
    """Ask one rank to dump: 'sent', or why not. Never blocks: a FIFO nobody reads is ENXIO."""
    try:
        st = os.lstat(pipe)
    except FileNotFoundError:
        return "no_pipe"
    except OSError as e:
        return f"error: {pipe}: {e.strerror}"
    if not stat.S_ISFIFO(st.st_mode):
        return "not_fifo"  # never write into a regular file or through a link
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as e:
        if e.errno == errno.ENXIO:
            return "no_reader"
        return f"error: {pipe}: {e.strerror}"
    try:
        os.write(fd, b"1\n")
    except BlockingIOError:
        pass  # the pipe is full of earlier requests: a dump is already asked for
    except OSError as e:
        return f"error: {pipe}: {e.strerror}"
    finally:
        os.close(fd)
    return "sent"


def wait_for_dumps(
    paths: Mapping[int, str], since: float, timeout: float, cancel: threading.Event
) -> dict[int, str]:
    """The dump files (rank -> path) written after `since` whose size stopped changing."""
    sizes: dict[int, int] = {}
    done: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(paths) and time.monotonic() < deadline and not cancel.is_set():
        for rank, path in paths.items():
            if rank in done:
                continue
            try:
                st = os.lstat(path)  # a link is never waited for (nor read: open_owned)
            except OSError:
                continue
            if st.st_mtime < since - 1.0 or st.st_size == 0 or not stat.S_ISREG(st.st_mode):
                continue
            if sizes.get(rank) == st.st_size:
                done[rank] = path  # the same size twice in a row: the writer has finished
            sizes[rank] = st.st_size
        if len(done) < len(paths):
            cancel.wait(_POLL_S)
    return done


def other_dumps(prefix: str, since: float, have: set[int]) -> dict[int, str]:
    """Fresh dumps of ranks that are not local: on a shared file system, the other nodes'.

    gputui on the other nodes (or their watchdogs) dump into the same place; with them the
    analyzer sees every rank and names ranks on other nodes too. Only files written within
    a minute of this trigger count, so an old incident's dumps are never mixed in.
    """
    directory, base = os.path.split(prefix)
    found: dict[int, str] = {}
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return found
    for name in names[:100_000]:
        rest = name[len(base) :] if name.startswith(base) else ""
        if not rest.isdigit() or int(rest) in have:
            continue
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_size and abs(st.st_mtime - since) <= 60:
                found[int(rest)] = path
        if len(found) >= 8192:
            break
    return found


def open_owned(path: str, uid: int | None) -> int:
    """A descriptor on `path`, a regular file owned by `uid` (the job's user), reached
    without following a link in its last component. OSError (saying why) otherwise; as
    root an unknown `uid` is refused too (root could read anything)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if uid is None and os.geteuid() == 0:
            raise OSError(errno.EPERM, "the job's user is unknown")
        if uid is not None and st.st_uid != uid:
            raise OSError(errno.EPERM, f"owned by uid {st.st_uid}, not the job's user {uid}")
        if st.st_nlink > 1 and uid is not None and uid != os.geteuid():
            raise OSError(errno.EPERM, "has other hard links")
    except BaseException:
        os.close(fd)
        raise
    return fd


def stage(
    dumps: Mapping[int, str], uid: int | None, gid: int | None, refused: list[str] | None = None
) -> tuple[str, list[int]]:
    """Copy the dumps (each opened with open_owned) into a new private directory the
    analyzer's user can read; why a dump was refused goes into `refused`."""
    tmp = tempfile.mkdtemp(prefix="gputui-fr-")
    staged = []
    for rank, path in sorted(dumps.items()):
        dest = os.path.join(tmp, f"{STAGED_PREFIX}{rank}")
        try:
            src_fd = open_owned(path, uid)
        except OSError as e:
            if refused is not None:
                why = "is a symbolic link" if e.errno == errno.ELOOP else e.strerror or str(e)
                refused.append(f"rank {rank}'s dump {redact_text(path)[:200]}: {why}")
            continue
        try:
            with os.fdopen(src_fd, "rb") as src, open(dest, "xb") as out:
                copied = 0
                while chunk := src.read(1 << 20):
                    copied += len(chunk)
                    if copied > MAX_DUMP_BYTES:
                        raise OSError(errno.EFBIG, "dump larger than 256 MiB")
                    out.write(chunk)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(dest)
            continue
        staged.append(rank)
    if os.geteuid() == 0 and uid not in (None, 0):
        for name in [tmp, *(os.path.join(tmp, f) for f in os.listdir(tmp))]:
            os.chown(name, uid, gid if gid is not None else -1)  # type: ignore[arg-type]
    return tmp, staged
