"""`gputui check`: the hang detector without a screen, for health checks and epilogues.

Exit status is the contract: 0 when the last verdict is ok, 1 when stalled or hung, 2 on
error. With --json, one object per line each time the verdict (state, spinning GPUs,
suspects) changes, so a caller can follow it as it happens.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gputui.commands.common import add_source_args, open_source, positive_float
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.collect.model import Snapshot
    from gputui.diagnose.verdict import Verdict

SAMPLE_TIMEOUT_S = 10.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="watch for an NCCL hang; exit 1 if stalled or hung",
        description=(
            "Sample live (or replay a recording as fast as it can) and report the hang "
            "detector's verdict. Exit 0: ok; 1: stalled or hung; 2: error."
        ),
    )
    add_source_args(p)
    p.add_argument(
        "--duration",
        type=positive_float,
        default=None,
        metavar="S",
        help="seconds to watch (live default: stall-after + 5; replay: the whole file)",
    )
    p.add_argument("--json", action="store_true", help="one JSON line per verdict change")
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
    p.set_defaults(func=run)


def _snapshots(args: argparse.Namespace) -> Iterator[Snapshot]:
    """Snapshots in time order: a replay's own timestamps, or live samples paced."""
    from gputui.collect.bounded import sample_bounded

    source = open_source(args, realtime=False)
    replay = source.kind == "replay"
    duration = args.duration
    if duration is None and not replay:
        duration = args.stall_after + 5.0
    first: float | None = None
    start = time.monotonic()
    try:
        while True:
            snap = source.sample() if replay else sample_bounded(source, SAMPLE_TIMEOUT_S)
            if snap is None:
                return
            first = snap.t if first is None else first
            if duration is not None and snap.t - first > duration:
                return
            yield snap
            if not replay:
                if time.monotonic() - start >= (duration or 0):
                    return
                time.sleep(source.next_delay())
    finally:
        source.close()


def _line(v: Verdict, t0: float) -> str:
    head = f"+{v.t - t0:7.1f} s  {v.state.upper():8s}"
    if not v.alarm:
        return f"{head} {v.reason}"
    sus = ", ".join(map(str, v.suspects)) or "none named"
    pids = f" (pid {', '.join(map(str, v.suspect_pids))})" if v.suspect_pids else ""
    spin = ", ".join(map(str, v.spinning))
    return f"{head} spinning GPU {spin} · suspect GPU {sus}{pids}\n{'':19s}{v.reason}"


def run(args: argparse.Namespace) -> int:
    from gputui.diagnose.detector import Detector
    from gputui.diagnose.verdict import verdict_to_json
    from gputui.jsonout import dumps

    if args.hang_after < args.stall_after:
        raise GputuiError("--hang-after must be at least --stall-after")
    det = Detector(stall_after=args.stall_after, hang_after=args.hang_after)
    last: Verdict | None = None
    last_alarm: Verdict | None = None
    alarms = 0
    first: Snapshot | None = None
    n = 0
    human: list[str] = []
    try:
        for snap in _snapshots(args):
            first = first or snap
            n += 1
            v = det.update(snap)
            if v.alarm:
                alarms += last is None or not last.alarm
                last_alarm = v
            if last is None or v.key() != last.key():
                if args.json:
                    print(dumps(verdict_to_json(v)), flush=True)
                else:
                    human.append(_line(v, first.t))
            last = v
    except KeyboardInterrupt:
        pass  # report what was seen so far
    if last is None or first is None:
        raise GputuiError("no samples to check")
    if not args.json:
        span = last.t - first.t
        where = "no GPUs" if not first.gpus else f"{len(first.gpus)} GPU(s)"
        print(f"gputui check: {n} samples over {span:.1f} s, {where}")
        print("\n".join(human))
        print(f"final: {last.state}: {last.reason}")
        if last_alarm is not None:
            cleared = "" if last.alarm else f" ({alarms} alarm(s), all cleared)"
            print(f"next steps{cleared}:")
            for step in last_alarm.next_steps:
                print(f"  - {step}")
    sys.stdout.flush()
    return 1 if last.alarm else 0
