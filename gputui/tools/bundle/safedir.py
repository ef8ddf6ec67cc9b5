"""A new directory made where the user asked, through no symbolic link, and filled safely.

A bundle is written as root into places other users may share (`--out D/b` with D writable
by another user, `/tmp/...`). Walking a path by name lets that user redirect the write: a
parent that is a link (`/tmp/link_to_etc/x` creates `/etc/x`), or the half-written
directory swapped for one of links (each `processes.json` written over a root file). So:

- every component of the parent is opened from the one before it (`openat` through
  `dir_fd`) with O_NOFOLLOW: a link anywhere in the path is refused, not followed;
- the partial directory is made in the final parent (mode 0700, a random hidden name, as
  `tempfile.mkdtemp` makes it) and held open: every file is written from that handle
  (`/proc/self/fd/N/...`, O_NOFOLLOW), so renaming the name away changes nothing;
- it is renamed to its final name relative to the parent's handle, and the name is checked
  to be that very directory (device and inode) afterwards;
- a failure, Ctrl-C or SIGTERM removes the partial directory, again from the handles.
"""

from __future__ import annotations

import errno
import os
import secrets
import signal
import stat
import threading
from pathlib import Path
from types import FrameType

from gputui.errors import GputuiError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LINK = "is a symbolic link; gputui does not write through links (give the real path)"


def _shown(path: Path | str) -> str:
    text = str(path)
    return text if text.isprintable() else ascii(text)


def open_parent(out: Path, *, create: bool = True) -> int:
    """A handle on `out`'s parent directory, reached component by component without
    following a link; missing directories are created (`create`). GputuiError otherwise."""
    start = "/" if out.is_absolute() else "."
    parts = [p for p in out.parent.parts if p not in ("/", "", ".")]
    fd = os.open(start, _DIR)
    walked = Path(start)
    try:
        for part in parts:
            walked = walked / part
            try:
                nxt = os.open(part, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: opened (and checked) below like any other
                nxt = os.open(part, _DIR, dir_fd=fd)
            except OSError as e:
                raise _refusal(walked, e, fd, part) from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _refusal(walked: Path, e: OSError, fd: int, part: str) -> GputuiError:
    try:
        link = stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        link = False
    if link or e.errno == errno.ELOOP:
        return GputuiError(f"{_shown(walked)}: {_LINK}")
    if e.errno == errno.ENOTDIR:
        return GputuiError(f"{_shown(walked)}: not a directory")
    return GputuiError(f"cannot write under {_shown(walked)}: {e.strerror or e}")


class PartialDir:
    """The hidden 0700 directory beside the final name, held open until it is renamed."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.parent = open_parent(out)
        try:
            self._check_target()
            self.name = self._make()
            self.fd = os.open(self.name, _DIR, dir_fd=self.parent)
        except BaseException:
            os.close(self.parent)
            raise
        self.done = False

    @property
    def path(self) -> Path:
        """The held directory by its handle: writes through it never resolve the name."""
        return Path(f"/proc/self/fd/{self.fd}")

    def _check_target(self) -> None:
        try:
            st = os.stat(self.out.name, dir_fd=self.parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise GputuiError(f"{_shown(self.out)}: {_LINK}")
        if not stat.S_ISDIR(st.st_mode) or _entries(self.parent, self.out.name):
            raise GputuiError(f"{_shown(self.out)} already exists and is not an empty directory")

    def _make(self) -> str:
        for _ in range(100):
            name = f".{self.out.name[:64]}.partial-{secrets.token_hex(6)}"
            try:
                os.mkdir(name, 0o700, dir_fd=self.parent)
                return name
            except FileExistsError:
                continue
        raise GputuiError(f"cannot create a directory beside {_shown(self.out)}")

    def finish(self) -> None:
        """Rename to the final name; GputuiError if the name then is not this directory."""
        os.rename(self.name, self.out.name, src_dir_fd=self.parent, dst_dir_fd=self.parent)
        self.done = True
        mine = os.fstat(self.fd)
        try:
            there = os.stat(self.out.name, dir_fd=self.parent, follow_symlinks=False)
        except OSError:
            there = None
        if there is None or (there.st_dev, there.st_ino) != (mine.st_dev, mine.st_ino):
            raise GputuiError(
                f"{_shown(self.out)}: the directory was swapped while the bundle was written "
                "(another user can write to its parent); the bundle is not trusted"
            )

    def discard(self) -> None:
        """Remove the partial directory and what was written in it (never after finish)."""
        if self.done:
            return
        _empty(self.fd)
        try:
            st = os.stat(self.name, dir_fd=self.parent, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == (os.fstat(self.fd).st_dev, os.fstat(self.fd).st_ino):
                os.rmdir(self.name, dir_fd=self.parent)
        except OSError:
            pass
        self.done = True

    def close(self) -> None:
        for fd in (self.fd, self.parent):
            try:
                os.close(fd)
            except OSError:
                pass


def _entries(parent: int, name: str) -> bool:
    fd = os.open(name, _DIR, dir_fd=parent)
    try:
        with os.scandir(fd) as it:
            return any(True for _ in it)
    finally:
        os.close(fd)


def _empty(fd: int, depth: int = 0) -> None:
    """Remove everything under the directory `fd`, through handles, never following a link."""
    if depth > 8:
        return
    try:
        with os.scandir(fd) as it:
            names = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return
    for name, is_dir in names:
        try:
            if is_dir:
                sub = os.open(name, _DIR, dir_fd=fd)
                try:
                    _empty(sub, depth + 1)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
        except OSError:
            continue


def write_new(base: Path, name: str, data: bytes) -> None:
    """Create `base/name` (subdirectories too) and write `data`, never through a link
    (O_NOFOLLOW from a handle on each directory). A file written twice (stacks/groups.txt
    of a replay) is replaced: nothing but gputui writes in the 0700 partial directory."""
    *dirs, leaf = name.split("/")
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the held handle's link
    try:
        for d in dirs:
            try:
                os.mkdir(d, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            nxt = os.open(d, _DIR, dir_fd=fd)
            os.close(fd)
            fd = nxt
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(leaf, flags, 0o644, dir_fd=fd)
        with os.fdopen(out, "wb") as f:
            f.write(data)
    finally:
        os.close(fd)


def append_note(directory: Path, name: str, text: str) -> None:
    """Append `text` to `directory/name`, every component opened without following a link.

    Args:
        directory: the bundle's directory.
        name: the file's name inside it.
        text: the text appended.
    """
    fd = open_parent(directory / name, create=False)
    try:
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(name, flags, dir_fd=fd)
        with os.fdopen(out, "a", encoding="utf-8") as f:
            f.write(text)
    finally:
        os.close(fd)


def on_sigterm_cancel() -> threading.Event:
    """An event set by SIGTERM, which then ends the command as Ctrl-C does (exit 143): the
    tools in flight are killed through the event, and the exception unwinds through
    `write_bundle`, which removes the partial directory. Before, a SIGTERM ended the
    process where it stood and left the hidden `.NAME.partial-*` directory behind.

    Returns:
        The event the bundle's tools watch.
    """
    cancel = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        cancel.set()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second one ends it at once
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
    return cancel
