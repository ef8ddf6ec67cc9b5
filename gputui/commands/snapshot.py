"""`gputui snapshot`: one snapshot as a table or JSON, for scripts and UI-less nodes.

Live, it samples twice, `--interval` apart: CPU% is a share of CPU time over an interval, and
a single read has none (every process showed 0.0). Exit status 0; 2 on bad input, or when
NVML fails, does not answer within `--timeout`, or reports a GPU it cannot read (what could
be read is still printed).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import TYPE_CHECKING, Any

from gputui.commands.common import add_detector_args, add_source_args, open_source, positive_float
from gputui.commands.prom_args import add_prom_args
from gputui.commands.prom_snapshot import at_or_time
from gputui.commands.prom_snapshot import run as run_history
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gputui.collect.model import Snapshot
    from gputui.diagnose.slow.straggler import Straggle
    from gputui.diagnose.verdict import Verdict

MAX_CPU_INTERVAL_S = 10.0  # a one-shot command should not sit for minutes


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "snapshot",
        help="print one snapshot (table or --json) and exit",
        description="Print one snapshot of the GPUs, their processes and jobs.",
    )
    add_source_args(
        p,
        interval=0.5,
        interval_help="live: measure CPU%% over S seconds (default 0.5, at most "
        f"{MAX_CPU_INTERVAL_S:g})",
    )
    p.add_argument("--json", action="store_true", help="print JSON: gpus, processes, jobs")
    p.add_argument(
        "--at",
        type=at_or_time,
        default=None,
        metavar="S",
        help="with --replay/--demo: the sample S seconds into the file (default: the last; "
        "--demo: the moment its verdict names the hang); past the file's end: the last, "
        "with a note on stderr. With --prometheus: a time (epoch, ISO 8601, '3h ago')",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="give up if NVML does not start, or a sample does not come, within S seconds "
        "(default 10)",
    )
    add_prom_args(p, window=False)
    p.add_argument("--from", dest="prom_from", metavar="T", default=None, help=argparse.SUPPRESS)
    add_detector_args(p)
    p.set_defaults(func=run, health_events=False)  # one look: the kernel log has past Xids


def verdict_summary(v: Verdict | None) -> dict[str, Any] | None:
    """The verdict of the snapshot's moment, in `check --json`'s words (state, suspects)."""
    if v is None:
        return None
    from gputui.diagnose.verdict import verdict_to_json

    d = verdict_to_json(v)
    d.pop("stacks", None)  # each rank's whole stack is `check --json`'s and the bundle's
    return d


def snapshot_to_json(
    snap: Snapshot, health: Any = None, straggles: Sequence[Straggle] = ()
) -> dict[str, Any]:
    """`health`: a gputui.diagnose.health.judge.HealthTracker that has seen the samples; its
    words, counters and Xids go under "health" (left out when it knows nothing).
    `straggles`: the wait shares of a replay's jobs (a live snapshot has no history)."""
    from gputui.collect.nvml.reader import GPU_UNREADABLE
    from gputui.collect.trace.format import process_to_dict

    gpus = []
    for g in snap.gpus:
        gpus.append(
            {
                "index": g.index,
                "name": g.name,
                "uuid": g.uuid,
                "util": g.util,
                "mem_util": g.mem_util,
                "power_w": g.power_w,
                "power_limit_w": g.power_limit_w,
                "mem_used_mb": g.mem_used_mb,
                "mem_total_mb": g.mem_total_mb,
                "temp_c": g.temp_c,
                "sm_mhz": g.sm_mhz,
                "mem_mhz": g.mem_mhz,
                "pstate": g.pstate,
                "events": g.events,
                "pids": list(g.pids),
                "mem_outside_mb": g.mem_outside_mb,
                "error": g.na.get(GPU_UNREADABLE),  # why the GPU gave no reading at all
                "not_available": g.na,
            }
        )
    procs = []
    for p in snap.processes:
        d = process_to_dict(p)
        d["gpus"] = list(p.gpus)
        d["rank"] = p.rank.rank if p.rank else None
        d["live"] = p.live
        d["owner"] = p.owner.to_json() if p.owner is not None else None
        if p.nvml_pid is not None:
            d["nvml_pid"], d["pid_guess"] = p.nvml_pid, p.pid_guess
        procs.append(d)
    jobs = [
        {
            "key": j.key,
            "label": j.label,
            "pids": list(j.pids),
            "gpus": list(j.gpus),
            "world_size": j.world_size,
            "how": j.how,
        }
        for j in snap.jobs
    ]
    out = {
        "t": snap.t,
        "source": snap.source,
        "hostname": snap.hostname,
        "driver": snap.driver,
        "gpu_error": snap.gpu_error,
        "phase": snap.phase,
        "gpus": gpus,
        "processes": procs,
        "jobs": jobs,
        **_wait_json(straggles),
    }
    if health is not None:
        from gputui.diagnose.health.report import health_line

        out.update(health_line(health, snap))
    return out


def _fmt(v: float | None, unit: str = "", nd: int = 0) -> str:
    return "N/A" if v is None else f"{v:.{nd}f}{unit}"


def snapshot_to_text(snap: Snapshot, health: Any = None, straggles: Sequence[Straggle] = ()) -> str:
    from gputui.collect.nvml.reader import GPU_UNREADABLE
    from gputui.textsafe import clean  # names, users, command lines: other people's text

    lines = []
    if snap.gpu_error:
        lines.append(f"{'GPU trouble' if snap.gpus else 'No GPUs'}: {clean(snap.gpu_error)}")
    if snap.gpus:
        lines.append(
            f"{'GPU':>3} {'name':<22} {'util':>5} {'mem%':>5} {'power/limit W':>14} "
            f"{'memory MiB':>17} {'temp':>5} {'SM MHz':>7} pids"
        )
    for g in snap.gpus:
        if GPU_UNREADABLE in g.na:
            why = clean(g.na[GPU_UNREADABLE])
            lines.append(f"{g.index:>3} {clean(g.name or '?')[:22]:<22} CANNOT BE READ: {why}")
            continue
        power = f"{_fmt(g.power_w)}/{_fmt(g.power_limit_w)}"
        mem = f"{_fmt(g.mem_used_mb)}/{_fmt(g.mem_total_mb)}"
        lines.append(
            f"{g.index:>3} {clean(g.name or '?')[:22]:<22} {_fmt(g.util, '%'):>5} "
            f"{_fmt(g.mem_util, '%'):>5} {power:>14} {mem:>17} {_fmt(g.temp_c, 'C'):>5} "
            f"{_fmt(g.sm_mhz):>7} {','.join(map(str, g.pids)) or '-'}"
            + (
                f" (+{g.mem_outside_mb:.0f} MiB held outside this container)"
                if g.mem_outside_mb
                else ""
            )
        )
    if snap.processes:
        lines.append("")
        lines.append(
            f"{'PID':>7} {'GPU':>5} {'rank':>4} {'user':<10} {'CPU%':>6} {'RSS MiB':>8} "
            f"{'state':<9} command"
        )
        for p in snap.processes:
            rank = p.rank.rank if p.rank and p.rank.rank is not None else "-"
            gpus = ",".join(map(str, p.gpus)) or "-"
            lines.append(
                f"{p.pid:>7} {gpus:>5} {rank!s:>4} {clean(p.user or '?')[:10]:<10} "
                f"{_fmt(p.cpu_percent, '', 1):>6} {_fmt(p.rss_mb):>8} "
                f"{clean(p.state or '?'):<9} "
                + (f"[{clean(p.owner.short())}] " if p.owner is not None else "")
                + clean(p.command, limit=80)
            )
    waits = _wait_words(straggles)
    for j in snap.jobs:
        wait = f"; {waits.pop(j.key)}" if j.key in waits else ""
        how = clean(f"({j.how}){wait}")  # the how names the job's own variables' values
        lines.append(f"job {clean(j.label)}: GPUs {','.join(map(str, j.gpus))} {how}")
    lines += [f"job {clean(key)}: {clean(words)}" for key, words in waits.items()]  # NVML alone saw
    if health is not None:
        from gputui.diagnose.health.report import health_text

        lines += [clean(x) for x in health_text(health, snap)]
    return "\n".join(lines)


def _wait_words(straggles: Sequence[Straggle]) -> dict[str, str]:
    """Job key -> its GPUs' wait shares and what they say (a replay's snapshot only)."""
    if not straggles:
        return {}
    from gputui.diagnose.slow.words import job_words

    return {s.key: job_words(s) for s in straggles}


def _wait_json(straggles: Sequence[Straggle]) -> dict[str, Any]:
    if not straggles:
        return {}
    from gputui.diagnose.slow.words import straggle_to_json

    return {"wait": [straggle_to_json(s) for s in straggles]}


def run(args: argparse.Namespace) -> int:
    from gputui.collect.bounded import sample_bounded

    if args.prometheus:  # a cluster's history at one moment: gputui.commands.prom_snapshot
        return run_history(args)
    if isinstance(args.at, str):
        raise GputuiError(
            f"--at {args.at[:40]!r}: seconds into the recording (a time is for --prometheus)"
        )
    live = not (args.replay or args.demo)
    if args.at is not None and live:
        raise GputuiError("--at only applies to --replay or --demo")
    if live and args.interval > MAX_CPU_INTERVAL_S:
        raise GputuiError(f"--interval: at most {MAX_CPU_INTERVAL_S:g} s for a snapshot")
    from gputui.commands.moment import verdict_moment
    from gputui.diagnose.health.judge import HealthTracker

    if args.replay:  # the moment and its history only (gputui.collect.trace.window)
        shown, history, judged, waits, verdict = _moment(args)
        return _print(args, shown, history, judged, waits, live=False, source=None, verdict=verdict)
    source = open_source(args, realtime=False)
    health = HealthTracker()  # Xids and counters of every sample up to the one shown
    straggles: list[Straggle] = []
    try:
        if source.kind == "replay":
            snaps = source.snaps  # type: ignore[attr-defined]
            if args.gpus:  # the recording's samples, seen through --gpus as any face sees them
                from gputui.collect.source import filter_gpus

                snaps = [filter_gpus(s, frozenset(args.gpus)) for s in snaps]
            i = len(snaps) - 1
            if args.at is not None:
                span = snaps[-1].t - snaps[0].t
                if args.at > span:  # past the end: the last sample, said, never in silence
                    last = math.floor(span * 10) / 10
                    print(
                        f"gputui: --at {args.at:g} is past the end of the recording, which "
                        f"lasts {last:g} s: its last sample is shown",
                        file=sys.stderr,
                    )
                i = next((j for j, s in enumerate(snaps) if s.t - snaps[0].t >= args.at), i)
            elif args.demo:  # the demo's point is its hang, not its idle end
                i = verdict_moment(snaps) or i
            seen = [snaps[: i + 1]]
            snap = snaps[i]
            for s in seen[0]:
                health.update(s)
            # A replay has the history a wait share needs (a live snapshot is one sample)
            from gputui.diagnose.slow.straggler import straggles_over

            straggles = straggles_over(seen[0])
        else:
            first = sample_bounded(source, args.timeout)  # starts every process's CPU clock
            if first is not None:
                health.update(first)
            time.sleep(args.interval)  # the window CPU% is measured over
            snap = sample_bounded(source, args.timeout)
            if snap is not None:
                health.update(snap)
            seen = [[s for s in (first, snap) if s is not None]]
    finally:
        source.close()
    assert snap is not None
    return _print(args, snap, seen[0], health, straggles, live=live, source=source)


WINDOW_S = 300.0
"""History judged with a replay's moment: more than the detector remembers (a hang is
called after 60 s, departed ranks are kept as long, wait shares span 30 s); a spin that
began earlier is followed back to its start (gputui.collect.trace.window)."""


def _moment(args: argparse.Namespace) -> tuple[Snapshot, list[Snapshot], Any, list[Any], Any]:
    """(the sample shown, its history, health, wait shares, its verdict) of `--replay FILE
    [--at S]`, reading only the window of history its verdict needs. The history is judged
    in one pass, each sample looked at once: a window of a file held as columns builds each
    sample as it comes and keeps none (a spin that began hours earlier is a long window)."""
    import sys

    from gputui.collect.source import filter_gpus
    from gputui.collect.trace.window import read_moment
    from gputui.diagnose.hang.classify import GpuState, classify_node
    from gputui.diagnose.hang.runs import DIP_MAX_S
    from gputui.diagnose.job_groups import GroupMemory
    from gputui.diagnose.slow.straggler import WaitShares
    from gputui.watch.run import WatchRun, replay_settings
    from gputui.watch.settings import WatchSettings

    def calm(snap: Snapshot) -> bool:
        return GpuState.SPINNING not in classify_node(snap.gpus).values()

    if not args.replay:
        raise GputuiError("--replay: empty file name")
    moment = read_moment(args.replay, args.at, WINDOW_S, calm, calm_s=DIP_MAX_S + 0.5)
    for note in moment.notes:
        print(f"gputui: {note}", file=sys.stderr)
    keep = frozenset(args.gpus) if getattr(args, "gpus", None) else None
    # straggles_over (gputui.diagnose.slow.straggler) and moment.verdicts, fed in the same
    # pass: the wait shares' own group memory, and a replay's Watcher with their defaults
    memory, shares = GroupMemory(), WaitShares()
    straggles: list[Any] = []
    snap: Snapshot | None = None
    verdict = None
    with WatchRun(replay_settings(WatchSettings.from_args(args))) as run:
        for s in moment.snaps:
            if keep is not None and snap is None:  # one --gpus rule for every face
                from gputui.commands.common import require_gpus

                require_gpus(args.gpus, sorted(g.index for g in s.gpus), "the recording")
            snap = filter_gpus(s, keep) if keep is not None else s
            groups = memory.update(snap)
            shares.observe(snap, groups)
            straggles = shares.judge(snap, groups)
            verdict = run.step(snap)
        health = run.watcher.health  # fed every sample by the Watcher's update
    assert snap is not None  # a moment has at least its own sample
    return snap, [snap], health, straggles, verdict


def _print(
    args: argparse.Namespace,
    snap: Snapshot,
    seen: list[Snapshot],
    health: Any,
    straggles: Any,
    *,
    live: bool,
    source: Any,
    verdict: Any = None,
) -> int:
    """`verdict`: the moment's, when the caller has judged its history already (a replay);
    else it is the last of `seen`'s verdicts."""
    from gputui.jsonout import dumps
    from gputui.watch.run import last_verdict

    if verdict is None:
        verdict = last_verdict(seen) if seen else None
    if args.json:
        d = snapshot_to_json(snap, health, straggles)
        print(dumps({**d, "verdict": verdict_summary(verdict)}, indent=2))
    else:
        from gputui.diagnose.states import State
        from gputui.textsafe import clean

        text = snapshot_to_text(snap, health, straggles)
        if verdict is not None and (verdict.alarm or verdict.state == State.BUSY):
            text = (
                f"verdict: {verdict.state.upper()}: {clean(verdict.reason)}\n"
                + "".join(f"  - {clean(f)}\n" for f in verdict.findings if f != verdict.reason)
                + text
            )
        print(text)
    problem = source.problem(snap) if live else None  # type: ignore[attr-defined]
    if problem:
        raise GputuiError(problem)
    from gputui.diagnose.exitcodes import of_verdict

    return of_verdict(verdict)  # a hang or a death is never 0, on any face
