"""`gputui record FILE`: write live samples to a trace that `--replay` (and `check`) can read."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from gputui.commands.common import interval_seconds, positive_float
from gputui.errors import GputuiError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "record",
        help="record live samples to FILE (JSON lines, .gz to compress)",
        description="Record live GPU and process samples to FILE until Ctrl-C or "
        "--duration. The file replays with `gputui --replay FILE`.",
    )
    p.add_argument("file", metavar="FILE", help="output file; gzip when it ends in .gz")
    p.add_argument(
        "--interval",
        type=interval_seconds,
        default=1.0,
        metavar="S",
        help="seconds between samples (default 1)",
    )
    p.add_argument(
        "--duration",
        type=positive_float,
        default=None,
        metavar="S",
        help="stop after S seconds (default: until Ctrl-C)",
    )
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.set_defaults(func=run)


def _check_target(path: Path, force: bool) -> None:
    """Refuse, before NVML starts, a FILE that gputui must not write to.

    A symbolic link (a dangling one too) is refused, never followed; so are directories,
    FIFOs, sockets and block devices. An existing regular file or a character device (a
    terminal, /dev/null, /dev/full) needs --force. TraceWriter opens with O_NOFOLLOW and,
    without --force, O_EXCL, so a file swapped in after this check is refused too.
    """
    import os
    import stat

    from gputui.collect.trace_read import shown

    name = shown(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if not path.parent.exists():
            raise GputuiError(f"{shown(path.parent)}: no such directory") from None
        return
    except OSError as e:
        raise GputuiError(f"{name}: {e.strerror or e}") from None
    if stat.S_ISLNK(mode):
        raise GputuiError(
            f"{name} is a symbolic link; gputui does not write through links (give the real path)"
        )
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            raise GputuiError(f"{name} is {kind}; record writes to a regular file")
    if not force:
        # Never clobber something the user saved.
        raise GputuiError(f"{name} exists; choose another name or pass --force")


def run(args: argparse.Namespace) -> int:
    from gputui.collect.bounded import sample_bounded
    from gputui.collect.live import LiveSource
    from gputui.collect.trace import TraceWriter
    from gputui.collect.trace_read import shown

    path = Path(args.file)
    if not args.file:
        raise GputuiError("record: empty file name")
    _check_target(path, args.force)
    source = LiveSource(interval=args.interval)
    if not source.nvml.devices:
        source.close()
        raise GputuiError(f"nothing to record: {source.nvml.error}")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        writer = TraceWriter(path, interval=args.interval, exclusive=not args.force)
    except GputuiError:
        source.close()
        raise
    deadline = time.monotonic() + args.duration if args.duration else None
    print(
        f"recording {len(source.nvml.devices)} GPU(s) to {shown(path)} every {args.interval:g} s "
        f"(Ctrl-C to stop)",
        file=sys.stderr,
    )
    try:
        while not stop.is_set():
            started = time.monotonic()
            snap = sample_bounded(source, max(10.0, args.interval * 5))
            if snap is not None:
                try:
                    writer.write(snap)  # flushed whole: a full disk loses only this sample
                except GputuiError as e:  # the disk refused it (ENOSPC, EFBIG, EIO...)
                    raise GputuiError(
                        f"{e}; kept the {writer.samples} complete sample(s) written before it"
                    ) from None
            if deadline is not None and time.monotonic() >= deadline:
                break
            stop.wait(max(0.0, args.interval - (time.monotonic() - started)))
    except BaseException:
        writer.abandon()  # keep what is on disk; write nothing more
        raise
    finally:
        source.close()
    writer.close()
    print(f"wrote {writer.samples} samples to {shown(path)}", file=sys.stderr)
    return 0
