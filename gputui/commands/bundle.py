"""`gputui bundle`: write an incident bundle directory and say where it is.

Exit status 0 when the bundle was written (parts that could not be had are notes inside it
and on stderr), 2 on bad input or when the directory cannot be written, and 2 when NVML fails,
does not answer within --timeout or cannot read a GPU: the bundle is still written (a hung
driver is when it is needed most), with NVML's state as a note in it and one line on stderr.
"""

from __future__ import annotations

import argparse
import re
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
from gputui.commands.prom_args import add_prom_args

if TYPE_CHECKING:
    from gputui.collect.model import ProcessInfo, Snapshot
    from gputui.collect.source import Source
    from gputui.diagnose.verdict import Verdict
    from gputui.watch.settings import WatchSettings

DEFAULT_TIMEOUT_S = 10.0  # NVML's start and each sample, when --timeout is not given
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
        help="time limit for NVML's start, each sample and each py-spy dump (default 10 s)",
    )
    add_prom_args(p)
    # health_events off: the kernel log has the past Xids (no event thread to join at exit)
    p.set_defaults(
        func=run, stall_after=10.0, hang_after=60.0, busy_limit=600.0, health_events=False
    )


def _samples(args: argparse.Namespace) -> tuple[list[Snapshot], str | None]:
    """The samples to bundle, and NVML's trouble in one line (None when there is none).

    The demo is bundled up to the moment its verdict names the hang (its end is idle)."""
    from gputui.errors import GputuiError

    if getattr(args, "prometheus", None):  # a node's history (gputui.commands.prom_replay)
        from gputui.commands.prom_replay import MAX_BUNDLE, bundle_samples

        return bundle_samples(args)[-MAX_BUNDLE:], None
    replay = args.demo or args.replay is not None  # `--replay ''` is bad input, not live
    try:
        src = open_source(args, realtime=False)
    except GputuiError as e:
        if replay:
            raise  # a bad recording is bad input
        return [], str(e)  # NVML did not start: bundle what the host can tell
    snaps: list[Snapshot] = []
    if replay:
        try:
            while (s := src.sample()) is not None:
                snaps.append(s)
        finally:
            src.close()
        args.recorded_node = getattr(src, "node", None) or "the recorded node"
        args.made_from = (
            "the bundled demo recording" if args.demo else f"the recording {args.replay}"
        )
        if args.demo:
            from gputui.commands.moment import verdict_moment
            from gputui.watch.settings import WatchSettings

            moment = verdict_moment(snaps, WatchSettings.from_args(args))
            snaps = snaps if moment is None else snaps[: moment + 1]
        return snaps[-MAX_REPLAY_SAMPLES:], None
    try:
        problem = _sample_live(args, src, snaps)
    finally:
        src.close()  # bounded; never on a hung library
    return snaps, problem or src.problem(snaps[-1] if snaps else None)  # type: ignore[attr-defined]


def _sample_live(args: argparse.Namespace, src: Source, snaps: list[Snapshot]) -> str | None:
    """Live samples for --seconds into `snaps`; NVML's error if a sample did not come."""
    from gputui.collect.bounded import sample_bounded
    from gputui.collect.pacing import Ticker
    from gputui.collect.source import NoSuchGpus
    from gputui.errors import GputuiError

    deadline = time.monotonic() + args.seconds
    pace = Ticker(src.next_delay)
    while pace.wait():
        try:
            s = sample_bounded(src, args.timeout or DEFAULT_TIMEOUT_S)
        except NoSuchGpus:
            raise  # bad input: no bundle of a view that shows nothing
        except GputuiError as e:
            return str(e)
        if s is not None:
            snaps.append(s)
        if pace.due() >= deadline:  # the next tick would be past --seconds
            return None
    return None


def _verdict(settings: WatchSettings, snaps: list[Snapshot]) -> Verdict | None:
    """The verdict at the last sample, with the stack dumps a recording carries (the
    bundle takes its own stacks; it does not auto-dump while sampling)."""
    from gputui.watch.run import last_verdict

    if not snaps:
        return None
    return last_verdict(snaps, settings)


_LIVE_STEP = re.compile(r"`gputui dump\b|\(j\) and press p|n adds native frames")


def on_recorded_node(v: Verdict | None, node: str | None) -> Verdict | None:
    """A replay's verdict with each next step that acts on its processes (`gputui dump 815`)
    said to belong to the recorded node, as `merge` says "On HOST:": those pids are that
    node's, and on this machine they are someone else's process or none."""
    import dataclasses

    if v is None or not node or not v.next_steps:
        return v
    where = f"On {node} (the recorded node; its pids are not this machine's): "
    steps = tuple(where + s if _LIVE_STEP.search(s) else s for s in v.next_steps)
    return dataclasses.replace(v, next_steps=steps)


def run(args: argparse.Namespace) -> int:
    from gputui.errors import GputuiError
    from gputui.textsafe import clean
    from gputui.tools.bundle.write import write_bundle
    from gputui.watch.settings import WatchSettings

    pids = parse_pids(args.pid, what="bundle") if args.pid is not None else None
    if pids is not None and (args.demo or args.replay is not None):
        raise GputuiError(
            "--pid takes stacks of this machine's processes; a bundle made from a recording "
            "holds only the recording's data (its stacks are the recorded ones)"
        )
    snaps, nvml_problem = _samples(args)
    # A replay's pids are the recorded node's: its stacks are the recorded ones.
    procs: list[ProcessInfo | int] | None = [] if getattr(args, "recorded_node", None) else None
    if pids is not None:
        seen = {p.pid: p for p in snaps[-1].processes if p.live} if snaps else {}
        procs = [seen.get(pid, pid) for pid in pids]
    from gputui.tools.bundle.safedir import append_note, on_sigterm_cancel

    cancel = on_sigterm_cancel()  # a SIGTERM kills the tools and removes the partial directory
    settings = WatchSettings.from_args(args)  # --stall-after, --hang-after, --busy-limit
    verdict = _verdict(settings, snaps)
    rep = write_bundle(
        args.out,
        cancel=cancel,
        snapshots=snaps,
        processes=procs,
        verdict=on_recorded_node(verdict, getattr(args, "recorded_node", None)),
        stall_after=settings.stall_after,
        hang_after=settings.hang_after,
        dump_timeout=args.timeout,
        recorded_node=getattr(args, "recorded_node", None),  # a replay: the recorded node
        made_from=getattr(args, "made_from", None),
        on_line=lambda ln: print(f"  {clean(ln)}", file=sys.stderr, flush=True),
    )
    if getattr(args, "history", None):
        from gputui.commands.prom_replay import write_history

        write_history(rep.path, args.history)
    if nvml_problem:
        try:  # by handles, never through a link: the directory's parent may be shared
            append_note(rep.path, "README.txt", f"note: NVML: {nvml_problem}\n")
        except OSError as e:  # a disk that filled up just now: the bundle itself is whole
            print(f"gputui: README.txt: note not added ({e.strerror or e})", file=sys.stderr)
    first, *notes = rep.summary_lines()  # they quote --out, paths, tool messages: cleaned
    for n in notes:
        print(f"gputui: {clean(n)}", file=sys.stderr)
    print(clean(first))
    if rep.headline:
        print(f"verdict: {clean(rep.headline)}")
    if snaps and not any(s.gpus for s in snaps):  # what the replay of it will show
        print(
            "gputui: no GPUs here: the bundle's trace holds this machine's processes and "
            "replays to this verdict",
            file=sys.stderr,
        )
    if nvml_problem:
        print(f"gputui: {nvml_problem}", file=sys.stderr)
        return 2
    from gputui.diagnose.exitcodes import of_verdict

    return of_verdict(verdict)  # the bundled verdict's code: a hang is never 0
