"""`gputui record FILE`: write live samples to a trace that `--replay` (and `check`) can read.

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
from pathlib import Path
from types import FrameType

from gputui.commands.common import positive_float
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
        type=positive_float,
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
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="stop with exit 2 if NVML does not start, or a sample does not come, within S "
        "seconds (default 10)",
    )
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gputui.collect.bounded import sample_bounded
    from gputui.collect.live import LiveSource
    from gputui.collect.trace import TraceWriter

    path = Path(args.file)
    if path.exists() and not args.force:
        # Never clobber something the user saved.
        raise GputuiError(f"{path} exists; choose another name or pass --force")
    if not path.parent.exists():
        raise GputuiError(f"{path.parent}: no such directory")
    source = LiveSource(interval=args.interval, timeout=args.timeout)
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
    writer = TraceWriter(path)
    deadline = time.monotonic() + args.duration if args.duration else None
    print(
        f"recording {len(source.nvml.devices)} GPU(s) to {path} every {args.interval:g} s "
        f"(Ctrl-C to stop)",
        file=sys.stderr,
    )
    failure: str | None = None  # why the recording stopped early
    said: str | None = None  # the unreadable-GPU message last said on stderr
    try:
        while not stop.is_set():
            started = time.monotonic()
            try:
                snap = sample_bounded(source, args.timeout, stop=stop)
            except GputuiError as e:  # NVML stopped answering: keep what was written
                failure = str(e)
                break
            if snap is not None:
                writer.write(snap)
                problem = source.problem(snap)
                if problem and problem != said:
                    print(f"gputui: {problem}; recording goes on", file=sys.stderr)
                    said = problem
            if deadline is not None and time.monotonic() >= deadline:
                break
            stop.wait(max(0.0, args.interval - (time.monotonic() - started)))
    finally:
        writer.close()
        if stop.is_set():  # stopped by a signal: leave promptly, the exit releases NVML
            source.leave()
        else:
            source.close()
    print(f"wrote {writer.samples} samples to {path}", file=sys.stderr)
    failure = failure or source.problem() or said
    if failure:
        raise GputuiError(failure)
    return 0
