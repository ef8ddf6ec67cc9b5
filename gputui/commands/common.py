"""Arguments and source selection shared by the dashboard and the subcommands.

Command modules import only argparse, this module and gputui.errors at their top level;
everything else is imported inside `run()`. `gputui --help` and the parser for the chosen
command then cost a few milliseconds, and the dashboard's first frame does not wait for
modules that only another subcommand needs (tests/test_cli_startup.py checks this).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.collect.source import Source


# Bounds of numeric options. Every option ends in a sleep, a timer or a deadline; Python's
# waits overflow near 9.2e9 s (threading.TIMEOUT_MAX) and `1e300` crashed them, so each
# option has an upper bound the code can actually wait for.
MAX_SECONDS = 366 * 86400.0
"""Longest duration, timeout, window or offset any option takes: a year. Long enough for a
recording's `--duration` or a replay's `--start`, far below any timer's overflow."""
MIN_INTERVAL_S = 0.05
"""Shortest sampling interval: one NVML + /proc sweep takes milliseconds; faster would only
burn a CPU (NVML's own counters update every 1/6 s or slower)."""
MAX_INTERVAL_S = 86400.0
"""Longest sampling interval: a day (a sparser sample tells nothing about a hang)."""
MIN_SPEED, MAX_SPEED = 0.01, 10_000.0
"""Replay speed factors: 100 x slower to 10,000 x faster (a day of recording in 9 s)."""
PID_MAX_LIMIT = 4_194_304
"""The kernel's largest possible pid_max (PID_MAX_LIMIT on 64-bit Linux)."""

_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _short(text: str) -> str:
    """An argument as an error message quotes it: on one line, at most 40 characters."""
    return repr(text[:40] + ("..." if len(text) > 40 else ""))


def _plain_number(text: str) -> float:
    """A decimal number as people type it: ASCII digits, an optional point and exponent.

    float() alone also takes "nan", "inf", "1_0" and digits of other scripts ("١٠" is 10);
    none of those is what a user means by a number of seconds.
    """
    t = text.strip()
    if not _NUMBER.fullmatch(t):
        raise argparse.ArgumentTypeError(f"not a number: {_short(text)}")
    return float(t)


def _num(v: float) -> str:
    return f"{v:.0f}" if v == int(v) else f"{v:g}"


def _bounded(text: str, lo: float, hi: float, what: str, *, lo_open: bool = False) -> float:
    """A number within lo..hi (above lo when `lo_open`), else "must be WHAT" for argparse."""
    v = _plain_number(text)
    if not math.isfinite(v) or v > hi or v < lo or (lo_open and v == lo):
        raise argparse.ArgumentTypeError(f"must be {what}: {_short(text)}")
    return v


def positive_float(text: str) -> float:
    """argparse type: seconds > 0 and <= MAX_SECONDS (a timeout, a duration, a window)."""
    return _bounded(
        text,
        0.0,
        MAX_SECONDS,
        f"a positive number of seconds, at most {_num(MAX_SECONDS)} (a year)",
        lo_open=True,
    )


def non_negative_float(text: str) -> float:
    """argparse type: seconds >= 0 and <= MAX_SECONDS (an offset into a recording)."""
    return _bounded(
        text, 0.0, MAX_SECONDS, f"zero or more seconds, at most {_num(MAX_SECONDS)} (a year)"
    )


def interval_seconds(text: str) -> float:
    """argparse type: a sampling interval, MIN_INTERVAL_S..MAX_INTERVAL_S seconds."""
    return _bounded(
        text,
        MIN_INTERVAL_S,
        MAX_INTERVAL_S,
        f"a positive number of seconds from {_num(MIN_INTERVAL_S)} to {_num(MAX_INTERVAL_S)}",
    )


def speed_factor(text: str) -> float:
    """argparse type: a replay speed factor, MIN_SPEED..MAX_SPEED."""
    return _bounded(
        text, MIN_SPEED, MAX_SPEED, f"a positive factor from {_num(MIN_SPEED)} to {_num(MAX_SPEED)}"
    )


def plain_int(text: str, lo: int, hi: int, what: str = "a whole number") -> int:
    """A whole number written in ASCII digits (an optional sign, spaces around it) within
    lo..hi; ValueError with a one-line message otherwise. int() alone would also take "1_0"
    and digits of other scripts, and spend quadratic time on a 100,000-digit one."""
    t = text.strip()
    digits = t[1:] if t[:1] in "+-" else t
    if not (digits.isascii() and digits.isdigit()) or len(digits) > len(str(hi)) + 2:
        raise ValueError(f"not {what}: {_short(text)}")
    v = int(t)
    if not lo <= v <= hi:
        raise ValueError(f"{what} must be {lo}..{hi}: {_short(text)}")
    return v


def pid_max() -> int:
    """This machine's largest pid (/proc/sys/kernel/pid_max), PID_MAX_LIMIT if unreadable."""
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            v = int(f.read().strip())
    except (OSError, ValueError):
        return PID_MAX_LIMIT
    return v if 1 < v <= PID_MAX_LIMIT else PID_MAX_LIMIT


def parse_pid(text: str) -> int:
    """A pid from the command line: plain ASCII digits, 1..pid_max; GputuiError otherwise."""
    top = pid_max()
    if not (text.isascii() and text.isdigit()) or len(text) > 10:
        raise GputuiError(f"not a process id: {_short(text)} (plain digits, 1..{top})")
    pid = int(text)
    if pid == 0:
        raise GputuiError(f"not a process id: {_short(text)} (pids start at 1)")
    if pid > top:
        raise GputuiError(f"no process with pid {pid}: above this kernel's pid_max ({top})")
    return pid


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
    add_interval_arg(p, interval, interval_help)
    p.add_argument(
        "--gpus",
        type=gpu_list,
        default=None,
        metavar="LIST",
        help="watch only these GPU indices (e.g. 0,1 or 4-7): one node seen as two",
    )


def add_interval_arg(
    p: argparse.ArgumentParser, interval: float = 1.0, interval_help: str | None = None
) -> None:
    """--interval S: the live source's sampling interval, the ticks of every sampling loop
    (gputui.collect.pacing), checked against MIN_INTERVAL_S..MAX_INTERVAL_S."""
    p.add_argument(
        "--interval",
        type=interval_seconds,
        default=interval,
        metavar="S",
        help=interval_help or f"seconds between live samples (default {interval:g})",
    )


def add_replay_args(p: argparse.ArgumentParser) -> None:
    """--speed and --start, for the commands that play a replay in (scaled) real time."""
    p.add_argument(
        "--speed",
        type=speed_factor,
        default=1.0,
        metavar="X",
        help="replay speed factor (default 1)",
    )
    p.add_argument(
        "--start",
        type=non_negative_float,
        default=None,
        metavar="S",
        help="start a replay S seconds into the file (--demo: into the demo, whose first "
        "job's processes appear at 2 s; a rank stops at about 6 s and the stall is called "
        "at about 16 s)",
    )


def add_detector_args(p: argparse.ArgumentParser, auto_dump: str | None = None) -> None:
    """The hang detector's two thresholds and, where the command can take stacks,
    --no-auto-dump (`auto_dump`: its help text). `check_detector_args` checks the pair."""
    p.add_argument(
        "--stall-after",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="seconds of spinning before a job is stalled (default 10)",
    )
    p.add_argument(
        "--hang-after",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="seconds of spinning before a job is hung (default 60)",
    )
    p.add_argument(
        "--busy-limit",
        type=positive_float,
        default=600.0,
        metavar="S",
        help="seconds a job may stay busy (its peers wait while the rank they wait for "
        "advances: a checkpoint, a compile) before that is an alarm too (default 600, the "
        "NCCL watchdog's default timeout)",
    )
    if auto_dump:
        p.add_argument("--no-auto-dump", action="store_true", help=auto_dump)
        from gputui.commands.debugserver_args import add_debug_server_args

        add_debug_server_args(p)  # where the evidence gathered at a stall may come from


def check_detector_args(args: argparse.Namespace) -> None:
    if args.hang_after < args.stall_after:
        raise GputuiError("--hang-after must be at least --stall-after")


def add_app_args(p: argparse.ArgumentParser) -> None:
    add_source_args(p)
    add_replay_args(p)
    p.add_argument("--no-mouse", action="store_true", help="do not capture the mouse")
    p.add_argument(
        "--theme",
        default=None,
        metavar="NAME",
        help="colour theme: textual-dark (default), textual-light, ansi-light (a light "
        "terminal, its own colours), ansi-dark, nord, ...; or $GPUTUI_THEME; ctrl+p switches",
    )
    p.add_argument(
        "--probe-hosts",
        default=None,
        metavar="LIST",
        help="P runs the whole-world probe over these hosts (node[01-04], a,b or @file) "
        "instead of this node's GPU pairs",
    )
    p.add_argument(
        "--probe-launcher",
        choices=("ssh", "srun", "pdsh", "local"),
        default="ssh",
        help="how --probe-hosts are reached (default ssh)",
    )
    add_detector_args(
        p, "do not py-spy a stalled job's ranks on its own (py-spy pauses each for a few ms)"
    )


def open_source(
    args: argparse.Namespace,
    realtime: bool = True,
    timeout: float | None = None,
    lazy: bool = False,
    on_gpus: Callable[[Any, str], object] | None = None,
) -> Source:
    """The Source the arguments ask for. Raises GputuiError on a bad replay file, and
    NvmlHung (a GputuiError) when NVML does not start within `timeout` (default: the
    command's --timeout, else nvml.DEFAULT_TIMEOUT_S). `lazy`: a --replay file is read on
    while it plays (the dashboard; gputui.collect.source.ReplaySource.from_file).
    `on_gpus`: the live GPUs' first reading, as soon as NVML answers (gputui.collect.live);
    not with --gpus (it would show every GPU) and never for a replay."""
    from gputui.collect.source import ReplaySource

    speed: float = getattr(args, "speed", None) or 1.0
    start: float | None = getattr(args, "start", None)
    source: Source
    if getattr(args, "demo", False):
        # The demo counts from its own start, which is where plain `--demo` begins.
        source = ReplaySource.demo(into_demo_s=start, speed=speed, realtime=realtime)
    elif getattr(args, "replay", None) is not None:
        if not args.replay:  # an empty name is an error, never a silent live run
            raise GputuiError("--replay: empty file name")
        start_s = start if start is not None else 0.0
        source = ReplaySource.from_file(
            args.replay, speed=speed, start_s=start_s, realtime=realtime, lazy=lazy
        )
        if getattr(args, "command", None) is not None:  # the dashboard shows them itself
            for note in source.notes:  # records of the wrong shape, skipped: said once
                print(f"gputui: {note}", file=sys.stderr)
    else:
        from gputui.collect.live import LiveSource
        from gputui.collect.nvml.reader import DEFAULT_TIMEOUT_S

        limit = timeout or getattr(args, "timeout", None) or DEFAULT_TIMEOUT_S
        source = LiveSource(
            interval=getattr(args, "interval", 1.0),
            timeout=limit,
            health_events=getattr(args, "health_events", True),
            on_gpus=None if getattr(args, "gpus", None) else on_gpus,
        )
    if getattr(args, "gpus", None):
        from gputui.collect.source import FilteredSource

        if isinstance(source, ReplaySource):  # its GPUs are known before it plays
            where = "the demo recording" if getattr(args, "demo", False) else "the recording"
            require_gpus(args.gpus, _recorded_gpus(source.snaps), where)
        source = FilteredSource(source, args.gpus)
    return source


def _recorded_gpus(snaps: Sequence[Any]) -> tuple[int, ...]:
    """The GPU indices a recording's first samples hold (all a lazy read has so far)."""
    return tuple(sorted({g.index for s in snaps[:64] for g in s.gpus}))


def require_gpus(gpus: Sequence[int] | None, have: Sequence[int], where: str) -> None:
    """The one rule for --gpus, in every face: a list that names none of the GPUs `where`
    has ("this node", "the demo recording") is one line and exit 2, naming the ones it has;
    with no GPU at all, the no-GPU message is the answer, not this one."""
    if gpus and have and not set(gpus) & set(have):
        listed = ",".join(map(str, gpus))
        raise GputuiError(f"--gpus {listed}: {where} has GPUs {', '.join(map(str, have))}")


def require_nonempty(name: str, values: list[int]) -> list[int]:
    if not values:
        raise GputuiError(f"{name}: nothing given")
    return values


def parse_pids(texts: list[str], what: str = "dump") -> list[int]:
    """PIDs from the command line; GputuiError (exit 2) for a non-number, a number outside
    1..pid_max, or a pid with no process."""
    import psutil

    if not texts:
        raise GputuiError(f"{what}: give at least one PID")
    pids = []
    for t in texts:
        pid = parse_pid(t)
        if not psutil.pid_exists(pid):
            raise GputuiError(f"no process with pid {pid}")
        if pid not in pids:
            pids.append(pid)
    return pids
