"""`gputui check`: the hang detector without a screen, for health checks and epilogues.

Exit status is the contract (gputui/diagnose/exitcodes.py, shown in --help): the worst
verdict seen over the run, so a replay or a --duration run that held a hang exits 1 even if
it ends ok; 3 for a sick GPU; a slow job (a straggler, `slow` in --json with its
`stragglers` and `wait_share`) is 0, or 4 with --fail-on-slow; 2 on error. With --json, one
object per line each time the verdict (state, spinning GPUs, suspects, stragglers) changes,
or evidence arrives: when a job stalls, a live check dumps its ranks with py-spy (once per
transition; --no-auto-dump turns it off) and prints a line with the findings, the
culprit's frame and every rank's stack. With --profile-straggler, a live check samples a
slow job's straggler with py-spy for a few seconds and prints its top functions
(`profile`). A replay shows the dumps the
recording carries. Each line also names the node (`host`) and the job's global ranks on its
GPUs (`job_key`, `world_size`, `ranks`), so that `gputui merge` can join the lines of every
node of a job (gputui/diagnose/merge/node_report.py).

A node with no NVIDIA driver has nothing to watch: 0. A node whose driver or GPUs are there
but NVML fails or does not answer within --timeout is a broken node: 2, with NVML's state in
one line. A health check must never pass there. A sick GPU (a hardware Xid, uncorrected ECC
errors, a pending row remap, a GPU NVML reports lost) is 3 when no job hangs: the other GPUs
are watched to the end, and each line carries `health` (every GPU's word, its counters, each
Xid with its number; gputui.diagnose.health.judge).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gputui.commands.check_after import add_probe_args, after_check
from gputui.commands.check_source import read_recording, release
from gputui.commands.check_text import profile_lines, said, verdict_line
from gputui.commands.common import (
    add_detector_args,
    add_host_arg,
    add_source_args,
    check_detector_args,
    open_source,
    positive_float,
)
from gputui.commands.prom_args import add_prom_args
from gputui.diagnose import exitcodes
from gputui.errors import GputuiError
from gputui.textsafe import clean, clean_lines

if TYPE_CHECKING:
    from gputui.collect.model import Snapshot
    from gputui.collect.source import Source
    from gputui.diagnose.verdict import Verdict
    from gputui.tools.attach.profile import StragglerProfiler
    from gputui.watch.run import WatchRun

# At the end of a live check, wait this long at most for a dump still running; the dump is
# bounded by its own per-rank limit (5 s) and runs the ranks in parallel.
DUMP_WAIT_S = 15.0
RANKS_SETTLE_S = 3.0  # at most this long before the first line, for where ranks write


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="watch for an NCCL hang; exit 1 if stalled or hung",
        description=(
            "Sample live (or replay a recording as fast as it can) and report the hang\n"
            "detector's verdict. The exit code is the worst verdict seen over the run."
        ),
        epilog=exitcodes.help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_args(p)
    add_host_arg(p)
    p.add_argument(
        "--duration",
        type=positive_float,
        default=None,
        metavar="S",
        help="seconds to watch (live default: stall-after + 5; replay: the whole file)",
    )
    p.add_argument("--json", action="store_true", help="one JSON line per verdict change")
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="live: exit 2 if NVML does not start, or a sample does not come, within S "
        "seconds (default 10)",
    )
    add_detector_args(p, "do not py-spy the stalled job's ranks (py-spy pauses each for a few ms)")
    p.add_argument(
        "--fail-on-slow",
        action="store_true",
        help="exit 4 when a job was slow (a straggler named) and none hung",
    )
    p.add_argument(
        "--profile-straggler",
        action="store_true",
        help="live: when a job is slow, sample its straggler with py-spy for a few seconds "
        "and print its top functions (`profile` in --json)",
    )
    add_probe_args(p)
    add_prom_args(p)
    p.set_defaults(func=run)


def _host(args: argparse.Namespace, snap: Snapshot) -> str:
    """--host, else the snapshot's host (live: the hostname; replay: the recording's), else a
    replay's file name without extensions."""
    from gputui.collect.hostlist import host_from_name

    if args.host:
        return args.host
    if snap.hostname:
        return snap.hostname
    if getattr(args, "replay", None):
        return host_from_name(args.replay)
    if getattr(args, "demo", False):
        from gputui.collect.source import demo_path

        return host_from_name(str(demo_path()))
    import socket

    return socket.gethostname()


def _check_gpus(args: argparse.Namespace, source: object) -> None:
    """--gpus that name no GPU of the node are a mistake, said at the first sample."""
    from gputui.commands.common import require_gpus

    require_gpus(args.gpus, getattr(source, "seen", None) or (), "this node")


def _nvml_problem(source: Source, snap: Snapshot | None = None) -> str | None:
    """NVML's trouble in one line (see LiveSource.problem); a replay has none."""
    if source.kind == "replay":
        return None
    return source.problem(snap, lost=False)  # type: ignore[attr-defined, no-any-return]


def _snapshots(args: argparse.Namespace, source: Source) -> Iterator[Snapshot]:
    """Snapshots in time order: a replay's own timestamps, or live samples paced.

    Live, raises GputuiError (exit 2) as soon as NVML is in trouble: failing although a
    driver is here, not answering, or a GPU that cannot be read.
    """
    from gputui.collect.bounded import sample_bounded
    from gputui.collect.pacing import Ticker

    replay = source.kind == "replay"
    pace = Ticker(source.next_delay)  # live: one sample per tick, the sample's time inside
    if why := _nvml_problem(source):
        raise GputuiError(why)
    duration = args.duration
    if duration is None and not replay:
        duration = args.stall_after + 5.0
    first: float | None = None
    idle: bool | None = None  # no GPU and no rank process: nothing to watch
    start = time.monotonic()
    pace.wait()  # tick 0: the first sample, at once
    while True:
        snap = source.sample() if replay else sample_bounded(source, args.timeout)
        if snap is None:
            return
        if why := _nvml_problem(source, snap):
            raise GputuiError(why)
        if first is None:
            _check_gpus(args, source)
        first = snap.t if first is None else first
        if duration is not None and snap.t - first > duration:
            return
        yield snap
        if not replay and not snap.gpus and source.kind == "host":
            if idle is None:
                ranks = _host_ranks()
                idle = not ranks
                if ranks and not args.json:  # said at once, not after the whole --duration
                    _say_watching(ranks, duration)
            if idle:
                return  # nothing to watch: said at once, not after the whole --duration
        if not replay:
            if time.monotonic() - start >= (duration or 0):
                return
            pace.wait()


def _say_watching(ranks: list[int], duration: float | None) -> None:
    """No GPU, but rank processes: on stderr at once what the run waits for, and how long."""
    pids = ", ".join(map(str, ranks[:4])) + (", ..." if len(ranks) > 4 else "")
    print(
        f"gputui check: no GPUs here; {len(ranks)} process{'es' * (len(ranks) != 1)} "
        f"(pid {pids}) carry a job's rank variables: watching for a rendezvous that never "
        f"completes for {duration or 0:.0f} s (--duration sets it)",
        file=sys.stderr,
        flush=True,
    )


def _host_ranks() -> list[int]:
    """The pids here that carry a distributed job's rank variables: with no GPU, a job
    waiting in its rendezvous is still a hang to watch for (one scan, a few ms)."""
    from gputui.collect.procs.hostranks import HostRankScanner

    scanner = HostRankScanner()
    try:
        scanner.scan()
        return sorted(r.pid for r in scanner.ranks())
    finally:
        scanner.close()


def run(args: argparse.Namespace) -> int:
    from gputui.diagnose.exitcodes import OK, SICK_GPU, SLOW, worst
    from gputui.diagnose.health.report import health_key, health_line, health_text
    from gputui.diagnose.merge.node_report import NodeReport
    from gputui.diagnose.verdict import verdict_to_json
    from gputui.jsonout import dumps
    from gputui.watch.run import WatchRun, quiet_steps
    from gputui.watch.settings import WatchSettings

    check_detector_args(args)
    if args.prometheus:  # a cluster's history: gputui.commands.prom_check
        from gputui.commands.prom_check import run as run_history

        return run_history(args)
    live = not (args.replay or args.demo)
    if live:
        source = open_source(args, realtime=False)  # NVML's start is bounded by --timeout
    else:
        source = read_recording(args)
    # From here the source is open (and a replay's samples frozen out of the collector):
    # whatever raises, release closes it and thaws them.
    watching: WatchRun | None = None
    profiler: StragglerProfiler | None = None
    try:
        watching = WatchRun(WatchSettings.from_args(args, live=live))
        profiler = _profiler(args, live)
    except BaseException:
        release(watching, profiler, source, live)
        raise
    watcher = watching.watcher  # its health and its evidence still running, at the end
    last: Verdict | None = None
    last_key: object = None
    last_said: str | None = None  # what the last text line said, without its time
    report: NodeReport | None = None
    last_alarm: Verdict | None = None
    alarms = 0
    slow_seen = False
    codes: set[int] = set()  # of every verdict seen: the exit code is the worst
    first: Snapshot | None = None
    n = 0
    human: list[str] = []

    def show(v: Verdict, snap: Snapshot) -> None:
        """Print a line when the verdict, its evidence, or the job's ranks on the GPUs
        changed (the last two are what `gputui merge` needs from each node)."""
        nonlocal last, last_alarm, alarms, last_key, last_said, slow_seen
        assert report is not None
        codes.add(exitcodes.of_state(v.state))
        if v.alarm:
            alarms += last is None or not last.alarm
            last_alarm = v
        slow_seen = slow_seen or bool(v.stragglers)
        keys = report.keys(v, snap)
        prof = profiler.poll(v, snap) if profiler is not None else None
        key = (
            v.key(),
            keys["job_key"],
            tuple(keys["ranks"].items()),
            prof is not None,
            health_key(watcher.health),
        )
        if key != last_key:
            if args.json:
                extra = {"profile": prof} if prof is not None else {}
                health = health_line(watcher.health, snap)  # only for a line printed
                print(dumps({**verdict_to_json(v), **keys, **health, **extra}), flush=True)
            elif first is not None and said(v) + profile_lines(prof) != last_said:
                human.append(verdict_line(v, first.t) + profile_lines(prof))  # health: at the end
                last_said = said(v) + profile_lines(prof)
        last, last_key = v, key

    last_snap: Snapshot | None = None
    interrupted = False
    # A replay of columns skips the samples that change nothing printed (watch.run.QuietSteps)
    quiet = quiet_steps(source, watcher) if profiler is None and args.duration is None else None
    try:
        for snap in _snapshots(args, source):
            first = first or snap
            last_snap = snap
            n += 1
            report = report or NodeReport(_host(args, snap))
            report.update(snap)
            judged = watching.step(snap)
            if n == 1:  # live only: a replay's Watcher has no rank tracker
                watcher.settle_ranks(RANKS_SETTLE_S)
            show(judged, snap)
            if quiet is not None:
                n += quiet.skip(judged)
        # The duration ended while a dump of the stalled job ran: its answer is the point.
        if watcher.pending():
            watcher.wait(DUMP_WAIT_S)
            v = watcher.latest()
            if v is not None and last_snap is not None:
                show(v, last_snap)
        if profiler is not None and profiler.pending() and last is not None and last_snap:
            profiler.wait(DUMP_WAIT_S)  # the straggler's profile is the point of the flag
            show(last, last_snap)
    except KeyboardInterrupt:
        interrupted = True  # report what was seen so far
    finally:
        release(watching, profiler, source, live)
    if last is None or first is None:
        if interrupted:
            return 130  # Ctrl-C before the first verdict: nothing to report, quietly
        raise GputuiError("no samples to check")
    assert report is not None and last_snap is not None
    after = after_check(
        args,
        watcher,
        last,
        last_alarm,
        last_snap,
        lambda v: {
            **verdict_to_json(v),
            **report.keys(v, last_snap),
            **health_line(watcher.health, last_snap),
        },
    )
    if args.json:
        for obj in after.json:
            print(dumps(obj), flush=True)
    if not args.json:
        span = last.t - first.t
        where = "no GPUs" if not first.gpus else f"{len(first.gpus)} GPU(s)"
        host = f" on {report.host}" if report is not None else ""
        # Reasons and findings quote recordings and stacks: other people's text.
        print(clean(f"gputui check: {n} samples over {span:.1f} s, {where}{host}"))
        print(clean_lines("\n".join(human)))
        sick_now = watcher.health.sick(last_snap.gpus if last_snap is not None else ())
        state = "sick GPU" if sick_now and not last.alarm else last.state
        for line in health_text(watcher.health, last_snap):
            print(clean(line))
        for line in after.text:
            print(clean(line))
        print(clean(f"final: {state}: {last.reason}"))
        if last_alarm is not None:
            cleared = "" if last.alarm else f" ({alarms} alarm(s), all cleared)"
            print(f"next steps{cleared}:")
            for step in last_alarm.next_steps:
                print(clean(f"  - {step}"))
    sys.stdout.flush()
    if why := _nvml_problem(source):
        raise GputuiError(why)  # e.g. nvmlShutdown did not answer: the driver is not well
    sick = watcher.health.sick(last_snap.gpus if last_snap is not None else ())
    return worst(
        *codes,
        SICK_GPU if sick else OK,
        SLOW if args.fail_on_slow and slow_seen else OK,
        *after.codes,
    )


def _profiler(args: argparse.Namespace, live: bool) -> StragglerProfiler | None:
    """--profile-straggler on a live node (a recording's processes are not here)."""
    if not getattr(args, "profile_straggler", False) or not live:
        return None
    from gputui.tools.attach.profile import StragglerProfiler

    return StragglerProfiler()
