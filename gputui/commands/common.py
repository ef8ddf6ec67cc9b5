"""Arguments and source selection shared by the dashboard and the subcommands.

Command modules import only argparse, this module and gputui.errors at their top level;
everything else is imported inside `run()`. `gputui --help` and the parser for the chosen
command then cost a few milliseconds, and the dashboard's first frame does not wait for
modules that only another subcommand needs (tests/test_cli_startup.py checks this).
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.collect.source import Source


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (an interval or a duration)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return v


def non_negative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more: {text!r}")
    return v


def gpu_list(text: str) -> tuple[int, ...]:
    """argparse type for --gpus: '0', '0,2', '4-7', '0-1,6' -> sorted GPU indices."""
    out: set[int] = set()
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise argparse.ArgumentTypeError(f"not a GPU list (e.g. 0,1 or 4-7): {text!r}")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a or b - a > 4096:
            raise argparse.ArgumentTypeError(f"not a GPU range: {part.strip()!r}")
        out.update(range(a, b + 1))
    return tuple(sorted(out))


def add_host_arg(p: argparse.ArgumentParser) -> None:
    """--host NAME: the node's name in reports that `gputui merge` puts together."""
    p.add_argument(
        "--host",
        metavar="NAME",
        default=None,
        help="name this node in --json lines (default: the hostname; replay: the "
        "recording's host, else its file name)",
    )


def add_source_args(
    p: argparse.ArgumentParser, interval: float = 1.0, interval_help: str | None = None
) -> None:
    """--replay FILE | --demo, --interval for live sampling, --gpus to watch some GPUs."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--replay", metavar="FILE", help="read a recorded trace instead of NVML")
    g.add_argument(
        "--demo",
        action="store_true",
        help="replay the bundled real recording of an NCCL hang on 2 x H200",
    )
    p.add_argument(
        "--interval",
        type=positive_float,
        default=interval,
        metavar="S",
        help=interval_help or f"seconds between live samples (default {interval:g})",
    )
    p.add_argument(
        "--gpus",
        type=gpu_list,
        default=None,
        metavar="LIST",
        help="watch only these GPU indices (e.g. 0,1 or 4-7): one node seen as two",
    )


def add_app_args(p: argparse.ArgumentParser) -> None:
    add_source_args(p)
    p.add_argument(
        "--speed",
        type=positive_float,
        default=1.0,
        metavar="X",
        help="replay speed factor (default 1)",
    )
    p.add_argument(
        "--start",
        type=non_negative_float,
        default=None,
        metavar="S",
        help="start a replay S seconds into the file",
    )
    p.add_argument("--no-mouse", action="store_true", help="do not capture the mouse")
    p.add_argument(
        "--stall-after",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="seconds of spinning before a job is reported stalled (default 10)",
    )
    p.add_argument(
        "--hang-after",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="seconds of spinning before a job is reported hung (default 60)",
    )
    p.add_argument(
        "--no-auto-dump",
        action="store_true",
        help="do not py-spy a stalled job's ranks on its own (py-spy pauses each for a few ms)",
    )


def open_source(
    args: argparse.Namespace, realtime: bool = True, timeout: float | None = None
) -> Source:
    """The Source the arguments ask for. Raises GputuiError on a bad replay file, and
    NvmlHung (a GputuiError) when NVML does not start within `timeout` (default: the
    command's --timeout, else nvml.DEFAULT_TIMEOUT_S)."""
    from gputui.collect.source import ReplaySource

    kw: dict[str, object] = {"realtime": realtime}
    if getattr(args, "speed", None):
        kw["speed"] = args.speed
    if getattr(args, "start", None) is not None:
        kw["start_s"] = args.start
    source: Source
    if getattr(args, "demo", False):
        source = ReplaySource.demo(**kw)
    elif getattr(args, "replay", None):
        source = ReplaySource.from_file(args.replay, **kw)
    else:
        from gputui.collect.live import LiveSource
        from gputui.collect.nvml import DEFAULT_TIMEOUT_S

        limit = timeout or getattr(args, "timeout", None) or DEFAULT_TIMEOUT_S
        source = LiveSource(interval=getattr(args, "interval", 1.0), timeout=limit)
    if getattr(args, "gpus", None):
        from gputui.collect.source import FilteredSource

        source = FilteredSource(source, args.gpus)
    return source


def require_nonempty(name: str, values: list[int]) -> list[int]:
    if not values:
        raise GputuiError(f"{name}: nothing given")
    return values


def parse_pids(texts: list[str], what: str = "dump") -> list[int]:
    """PIDs from the command line; GputuiError (exit 2) for a non-number or a missing pid."""
    import psutil

    if not texts:
        raise GputuiError(f"{what}: give at least one PID")
    pids = []
    for t in texts:
        try:
            pid = int(t)
        except ValueError:
            raise GputuiError(f"not a process id: {t!r}") from None
        if pid <= 0:
            raise GputuiError(f"not a process id: {t!r}")
        if not psutil.pid_exists(pid):
            raise GputuiError(f"no process with pid {pid}")
        if pid not in pids:
            pids.append(pid)
    return pids
