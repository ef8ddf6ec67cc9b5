"""`gputui snapshot`: one snapshot as a table or JSON, for scripts and UI-less nodes.

Live, it samples twice, `--interval` apart: CPU% is a share of CPU time over an interval, and
a single read has none (every process showed 0.0). Exit status 0; 2 on bad input, or when
NVML fails, does not answer within `--timeout`, or reports a GPU it cannot read (what could
be read is still printed).
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from gputui.commands.common import add_source_args, non_negative_float, open_source, positive_float
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.collect.model import Snapshot

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
        type=non_negative_float,
        default=None,
        metavar="S",
        help="with --replay/--demo: the sample S seconds into the file (default: last)",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="give up if NVML does not start, or a sample does not come, within S seconds "
        "(default 10)",
    )
    p.set_defaults(func=run)


def snapshot_to_json(snap: Snapshot) -> dict[str, Any]:
    from gputui.collect.nvml import GPU_UNREADABLE
    from gputui.collect.trace import process_to_dict

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
    return {
        "t": snap.t,
        "source": snap.source,
        "hostname": snap.hostname,
        "driver": snap.driver,
        "gpu_error": snap.gpu_error,
        "phase": snap.phase,
        "gpus": gpus,
        "processes": procs,
        "jobs": jobs,
    }


def _fmt(v: float | None, unit: str = "", nd: int = 0) -> str:
    return "N/A" if v is None else f"{v:.{nd}f}{unit}"


def snapshot_to_text(snap: Snapshot) -> str:
    from gputui.collect.nvml import GPU_UNREADABLE
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
                f"{clean(p.state or '?'):<9} {clean(p.command, limit=80)}"
            )
    for j in snap.jobs:
        lines.append(f"job {clean(j.label)}: GPUs {','.join(map(str, j.gpus))} ({j.how})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from gputui.collect.bounded import sample_bounded
    from gputui.jsonout import dumps

    live = not (args.replay or args.demo)
    if args.at is not None and live:
        raise GputuiError("--at only applies to --replay or --demo")
    if live and args.interval > MAX_CPU_INTERVAL_S:
        raise GputuiError(f"--interval: at most {MAX_CPU_INTERVAL_S:g} s for a snapshot")
    source = open_source(args, realtime=False)
    try:
        if source.kind == "replay":
            snaps = source.snaps  # type: ignore[attr-defined]
            snap = snaps[-1]
            if args.at is not None:
                snap = next((s for s in snaps if s.t - snaps[0].t >= args.at), snaps[-1])
        else:
            sample_bounded(source, args.timeout)  # starts every process's CPU clock
            time.sleep(args.interval)  # the window CPU% is measured over
            snap = sample_bounded(source, args.timeout)
    finally:
        source.close()
    assert snap is not None
    print(dumps(snapshot_to_json(snap), indent=2) if args.json else snapshot_to_text(snap))
    problem = source.problem(snap) if live else None  # type: ignore[attr-defined]
    if problem:
        raise GputuiError(problem)
    return 0
