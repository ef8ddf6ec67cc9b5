"""`gputui bundle`: write an incident bundle directory and say where it is.

Exit status 0 when the bundle was written (parts that could not be had are notes inside it
and on stderr), 2 on bad input or when the directory cannot be written.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from gputui.commands.common import (
    add_source_args,
    non_negative_float,
    open_source,
    parse_pids,
    positive_float,
)

if TYPE_CHECKING:
    from gputui.collect.model import ProcessInfo, Snapshot
    from gputui.diagnose.verdict import Verdict

MAX_REPLAY_SAMPLES = 2400  # ~5 min of a 2-GPU recording at 4 Hz: enough for the detector


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bundle",
        help="write an incident bundle: samples, verdict, stacks, env (redacted), libs, topology",
        description=(
            "Write a directory with recent samples (a replayable trace), the hang verdict, "
            "py-spy stacks of the GPU processes (or of --pid), their command lines, "
            "environments with secrets redacted, the CUDA/NCCL libraries they loaded, and "
            "nvidia-smi topo -m. Prints where it was written."
        ),
    )
    add_source_args(p)
    p.add_argument(
        "--pid",
        action="append",
        default=None,
        metavar="PID",
        help="take stacks of this process (repeatable; default: every GPU process)",
    )
    p.add_argument("--out", metavar="DIR", help="directory (default ./gputui-bundle-HOST-TIME)")
    p.add_argument(
        "--seconds",
        type=non_negative_float,
        default=3.0,
        metavar="S",
        help="live: sample for S seconds first (default 3)",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        metavar="S",
        help="time limit per py-spy dump (default 10 s)",
    )
    p.set_defaults(func=run)


def _samples(args: argparse.Namespace) -> list[Snapshot]:
    from gputui.collect.bounded import sample_bounded

    src = open_source(args, realtime=False)
    snaps: list[Snapshot] = []
    try:
        if src.kind == "replay":
            while (s := src.sample()) is not None:
                snaps.append(s)
            return snaps[-MAX_REPLAY_SAMPLES:]
        deadline = time.monotonic() + args.seconds
        while True:
            s = sample_bounded(src, 10.0)
            if s is not None:
                snaps.append(s)
            if time.monotonic() + src.next_delay() > deadline:
                return snaps
            time.sleep(src.next_delay())
    finally:
        src.close()


def _verdict(args: argparse.Namespace, snaps: list[Snapshot]) -> Verdict | None:
    """The verdict at the last sample, with the stack dumps a recording carries (the
    bundle takes its own stacks; it does not auto-dump while sampling)."""
    from gputui.watch import Watcher

    if not snaps:
        return None
    w = Watcher(getattr(args, "stall_after", 10.0), getattr(args, "hang_after", 60.0), live=False)
    try:
        v = None
        for s in snaps:
            v = w.update(s)
        return v
    finally:
        w.close()


def run(args: argparse.Namespace) -> int:
    from gputui.tools.bundle import write_bundle

    pids = parse_pids(args.pid, what="bundle") if args.pid is not None else None
    snaps = _samples(args)
    procs: list[ProcessInfo | int] | None = None
    if pids is not None:
        seen = {p.pid: p for p in snaps[-1].processes if p.live} if snaps else {}
        procs = [seen.get(pid, pid) for pid in pids]
    rep = write_bundle(
        args.out,
        snapshots=snaps,
        processes=procs,
        verdict=_verdict(args, snaps),
        stall_after=getattr(args, "stall_after", 10.0),
        hang_after=getattr(args, "hang_after", 60.0),
        dump_timeout=args.timeout,
        on_line=lambda ln: print(f"  {ln}", file=sys.stderr, flush=True),
    )
    first, *notes = rep.summary_lines()
    for n in notes:
        print(f"gputui: {n}", file=sys.stderr)
    print(first)
    return 0
