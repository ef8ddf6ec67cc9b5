"""`gputui record FILE`: write live samples to a trace that `--replay` (and `check`) can read.

The hang detector runs while recording: when a job stalls (and again when it hangs), its
ranks are dumped with py-spy once, and the dump is written into the file as a
`{"type": "stacks"}` record, so a replay shows the culprit's frame at the right sample.

SIGTERM and Ctrl-C end the recording cleanly and at once: the file keeps every complete
sample, NVML is left to the process's exit (nvmlShutdown is not waited for), and a second
signal ends the process whatever it is doing. NVML is bounded by --timeout: a start or a
sample that does not come ends the recording with exit 2, keeping what was written. A GPU
that becomes unreadable (lost) is said once on stderr and recorded as it is (no readings);
the exit status is then 2.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from gputui.commands.common import (
    add_detector_args,
    add_interval_arg,
    check_detector_args,
    open_source,
    positive_float,
)
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.collect.source import Source
    from gputui.collect.trace.format import TraceWriter
    from gputui.watch.watcher import Watcher

DUMP_WAIT_S = 15.0  # at the end, a dump still running is waited for (it is bounded itself)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "record",
        help="record live samples to FILE (JSON lines, .gz to compress)",
        description="Record live GPU and process samples to FILE until Ctrl-C or "
        "--duration. The file replays with `gputui --replay FILE`.",
    )
    p.add_argument("file", metavar="FILE", help="output file; gzip when it ends in .gz")
    add_interval_arg(p, 1.0, "seconds between samples (default 1)")
    p.add_argument(
        "--duration",
        type=positive_float,
        default=None,
        metavar="S",
        help="stop after S seconds (default: until Ctrl-C)",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="stop with exit 2 if NVML does not start, or a sample does not come, within S "
        "seconds (default 10)",
    )
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    add_detector_args(
        p,
        "do not py-spy a stalled job's ranks into the recording (py-spy pauses each rank "
        "for a few ms)",
    )
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

    from gputui.collect.trace.read import shown

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


def write_samples(
    source: Source,
    writer: TraceWriter,
    watcher: Watcher,
    interval: float,
    deadline: float | None,
    stop: threading.Event,
    *,
    timeout: float = 10.0,
    codes: list[int] | None = None,
) -> str | None:
    """Sample until `stop`, the deadline or the source's end; write each sample, and each
    stack dump the Watcher took, as soon as it is there (a killed recorder keeps them).

    Each sample is bounded by `timeout`. Returns what went wrong with NVML, in one line:
    a sample that did not come (the recording stops there), or GPUs that cannot be read
    (said once on stderr when it changes; the recording goes on). None when nothing did.
    """
    from gputui.collect.bounded import sample_bounded
    from gputui.collect.pacing import Ticker

    problem_of = getattr(source, "problem", None)  # the live source's NVML state
    failure: str | None = None
    said: str | None = None
    pace = Ticker(interval, stop=stop)  # one sample per tick, the sample's time inside
    while pace.wait():
        try:
            snap = sample_bounded(source, timeout, stop=stop)
        except GputuiError as e:  # NVML stopped answering: keep what was written
            failure = str(e)
            break
        if snap is not None:
            try:
                writer.write(snap)  # flushed whole: a full disk loses only this sample
            except GputuiError as e:  # the disk refused it (ENOSPC, EFBIG, EIO...)
                raise GputuiError(
                    f"{e}; kept the {writer.samples} complete sample(s) written before it"
                ) from None
            for rec in snap.records:  # GPU health (Xids, counters), at the sample's time
                writer.write_record(rec)
            # Judged at the time the file holds (to the ms), so a replay of the file gives
            # the verdict this run gave: paced on the interval's grid, a spin lasts
            # stall_after to within a ms, and the rounding alone would call it a sample apart.
            v = watcher.update(replace(snap, t=round(snap.t, 3)))  # never blocks
            if codes is not None:  # the run's exit code is its worst verdict's
                from gputui.diagnose.exitcodes import of_verdict

                codes.append(of_verdict(v))
            problem = problem_of(snap) if problem_of is not None else None
            if problem and problem != said:
                print(f"gputui: {problem}; recording goes on", file=sys.stderr)
                said = problem
        for rec in watcher.take_records():
            writer.write_record(rec)
        if snap is None or deadline is not None and time.monotonic() >= deadline:
            break
    if failure is None and watcher.pending() and not stop.is_set():
        watcher.wait(DUMP_WAIT_S)  # a dump that was running belongs in the file
    for rec in watcher.take_records():
        writer.write_record(rec)
    return failure or said


def run(args: argparse.Namespace) -> int:
    from gputui.collect.live import LiveSource
    from gputui.collect.trace.format import TraceWriter
    from gputui.collect.trace.read import shown
    from gputui.watch.run import WatchRun
    from gputui.watch.settings import WatchSettings

    check_detector_args(args)
    path = Path(args.file)
    if not args.file:
        raise GputuiError("record: empty file name")
    _check_target(path, args.force)
    source = open_source(args)  # the live source of every command, at --interval
    assert isinstance(source, LiveSource)  # record has no --replay, --demo or --gpus
    if not source.nvml.devices:
        source.close()
        raise GputuiError(f"nothing to record: {source.problem() or source.nvml.error}")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        # A second signal ends the process at once, whatever the first one is waiting on.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        writer = TraceWriter(path, interval=args.interval, exclusive=not args.force)
    except GputuiError:
        source.close()
        raise
    watching = WatchRun(WatchSettings.from_args(args))  # live: it gathers at a stall
    deadline = time.monotonic() + args.duration if args.duration else None
    print(
        f"recording {len(source.nvml.devices)} GPU(s) to {shown(path)} every {args.interval:g} s "
        f"(Ctrl-C to stop)",
        file=sys.stderr,
    )
    failure: str | None = None  # NVML's trouble, said at the end with exit 2
    codes: list[int] = []
    try:
        failure = write_samples(
            source,
            writer,
            watching.watcher,
            args.interval,
            deadline,
            stop,
            timeout=args.timeout,
            codes=codes,
        )
    except BaseException:
        writer.abandon()  # keep what is on disk (complete samples); write nothing more
        raise
    finally:
        watching.close()
        if stop.is_set():  # stopped by a signal: leave promptly, the exit releases NVML
            source.leave()
        else:
            source.close()
    writer.close()
    dumps = f" and {writer.records} record(s) (stack dumps, GPU health)" if writer.records else ""
    print(f"wrote {writer.samples} samples{dumps} to {shown(path)}", file=sys.stderr)
    failure = failure or source.problem()
    if failure:
        raise GputuiError(failure)
    from gputui.diagnose.exitcodes import worst

    return worst(*codes)  # a hang seen while recording is never 0
