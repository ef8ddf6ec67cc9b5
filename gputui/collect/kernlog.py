"""The kernel log, read without a shell and without blocking: /dev/kmsg, record by record.

Why /dev/kmsg and not `dmesg`: each read() returns one whole record with its sequence number
and its time since boot, so a follower opened once reads only what is new on each poll (no
re-reading, no re-parsing the whole ring), a non-blocking fd never waits, and no subprocess
is started every few seconds. Reading it needs what `dmesg` needs (root, or CAP_SYSLOG when
`kernel.dmesg_restrict` is 1): where it is refused, `error` says so once and the callers go on
with NVML alone.

Consumers parse the lines they care about: GPU health (`NVRM: Xid ...`, a GPU fallen off the
bus) and why a rank is gone (the OOM killer, segfaults). The text is untrusted: it is kept as
the kernel wrote it, bounded, and sanitized by whoever shows it.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass

KMSG = "/dev/kmsg"
RECORD_MAX = 8192  # the kernel refuses (EINVAL) a read buffer smaller than one record
MAX_RECORDS_PER_POLL = 20_000  # bounds the first read of a full ring (a few MB at most)
MAX_KEEP = 2_000  # lines kept by a follower (newest)
POLL_BUDGET_S = 0.5  # one poll never reads for longer than this


@dataclass(frozen=True)
class KernelLine:
    """One kernel log record: wall-clock time (from the kernel's time since boot), its
    sequence number, and the message (continuation lines dropped)."""

    t: float
    seq: int
    text: str


def parse_record(raw: bytes, boot_wall: float) -> KernelLine | None:
    """`pri,seq,usec,flags[,...];message` -> KernelLine; None for anything else."""
    head, sep, rest = raw.partition(b";")
    if not sep:
        return None
    fields = head.split(b",")
    if len(fields) < 3:
        return None
    try:
        seq, usec = int(fields[1]), int(fields[2])
    except ValueError:
        return None
    msg = rest.split(b"\n", 1)[0].decode("utf-8", "replace")
    return KernelLine(boot_wall + usec / 1e6, seq, msg[:2000])


def boot_wall_time() -> float:
    """The wall-clock time of the kernel's clock zero (/dev/kmsg stamps are since boot)."""
    return time.time() - time.clock_gettime(time.CLOCK_MONOTONIC)


class KernelLog:
    """A follower of the kernel log: `poll()` returns the records added since the last poll
    (the whole ring at the first), never blocks, never raises. `error` is set, once, when the
    log cannot be read, with the reason a person can act on."""

    def __init__(self, path: str = KMSG) -> None:
        self.path = path
        self.error: str | None = None
        self._fd: int | None = None
        self._boot = boot_wall_time()
        self._opened = False

    def _open(self) -> int | None:
        if self._opened:
            return self._fd
        self._opened = True
        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            self.error = _why(e)
        return self._fd

    def poll(self) -> list[KernelLine]:
        fd = self._open()
        if fd is None:
            return []
        out: list[KernelLine] = []
        deadline = time.monotonic() + POLL_BUDGET_S
        while len(out) < MAX_RECORDS_PER_POLL and time.monotonic() < deadline:
            try:
                raw = os.read(fd, RECORD_MAX)
            except BlockingIOError:
                break  # nothing more for now
            except OSError as e:
                if e.errno == errno.EPIPE:
                    continue  # records overwritten while we read: the next read goes on
                self.error = _why(e)
                self.close()
                break
            if not raw:
                break
            line = parse_record(raw, self._boot)
            if line is not None:
                out.append(line)
        return out[-MAX_KEEP:]

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


def _why(e: OSError) -> str:
    if e.errno in (errno.EPERM, errno.EACCES):
        return (
            "the kernel log is not readable (kernel.dmesg_restrict=1 needs root or "
            "CAP_SYSLOG): Xids and OOM-killer lines come from NVML alone"
        )
    if e.errno == errno.ENOENT:
        return "the kernel log is not readable here (no /dev/kmsg, e.g. in a container)"
    return f"the kernel log could not be read ({e.strerror or e})"
