"""`gputui snapshot --prometheus URL --at T`: the cluster as its history shows it at one
moment: every GPU's readings and class, and every job's verdict then.

The detector needs the minutes before the moment (a stall is a run of spinning samples),
so the window read ends at --at and starts HISTORY_S (or --from) before it; the GPUs shown
are the window's last step, each job's state the last verdict of the window.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from gputui.commands.prom_args import check_alone, read_window
from gputui.errors import GputuiError

HISTORY_S = 900.0  # 15 minutes before the moment: longer than any stall to tell


def at_or_time(text: str) -> float | str:
    """--at: seconds into a recording (a number), or, for --prometheus, a time such as
    '3h ago' or an ISO 8601 instant (checked when the command runs)."""
    from gputui.commands.common import non_negative_float

    try:
        return non_negative_float(text)
    except argparse.ArgumentTypeError:
        return text


def run(args: argparse.Namespace) -> int:
    from gputui.collect.prom.timespec import iso, parse_time
    from gputui.diagnose.hang.classify import classify_gpu
    from gputui.diagnose.history.jobs import one_job_per_node
    from gputui.diagnose.history.judge import gpu_ref, sample_time
    from gputui.diagnose.history.samples import GpuReader
    from gputui.diagnose.history.window import judge_window
    from gputui.diagnose.states import State
    from gputui.jsonout import dumps
    from gputui.textsafe import clean

    check_alone(args)
    now = time.time()
    at = now if args.at is None else parse_time(str(args.at), now, "--at")
    start = at - max(HISTORY_S, 2 * args.hang_after)
    if getattr(args, "prom_from", None):
        start = parse_time(args.prom_from, now, "--from")
        if start >= at:
            raise GputuiError("--from must be before --at")
    hist = read_window(args, start, at)
    by_label = args.job_label is not None
    j = judge_window(hist, args.stall_after, args.hang_after, by_label=by_label, job=args.prom_job)
    readers = [GpuReader(g, not one_job_per_node(hist, by_label)) for g in hist.gpus]
    k = hist.n - 1
    gpus: list[dict[str, Any]] = []
    for g, r in zip(hist.gpus, readers, strict=True):
        s = r.sample(k)
        present = r.present(k)
        gpus.append(
            {
                **gpu_ref(g, hist, k),
                "model": g.model,
                "t": sample_time(g, hist, k) if present else None,
                "util": s.util,
                "mem_util": s.mem_util,
                "power_w": s.power_w,
                "power_limit_w": s.power_limit_w,
                "mem_used_mb": s.mem_used_mb,
                "state": str(classify_gpu(s)) if present else "missing",
            }
        )
    last: dict[str, dict[str, Any]] = {}
    for e in j.events:
        if e.kind == "verdict":
            last[e.data["job"]] = {"t": e.t, **e.data}
    jobs = [
        last.get(r.key, {"job": r.key, "state": State.OK, "suspects": [], "spinning": []})
        for r in j.jobs
    ]
    if args.json:
        out = {
            "t": at,
            "time": iso(at),
            "source": hist.family.name,
            "gpus": gpus,
            "jobs": [
                {**jb, "stragglers": r.stragglers} for jb, r in zip(jobs, j.jobs, strict=True)
            ],
            "events": [
                {"t": e.t, "kind": e.kind, **e.data} for e in j.events if e.kind != "verdict"
            ],
            "notes": j.notes,
        }
        print(dumps(out))
        return 0
    print(clean(f"gputui snapshot: {hist.family.name} series at {iso(at)}, {len(gpus)} GPU(s)"))
    for note in j.notes:
        print(clean(f"note: {note}"))
    print(f"{'node':<16} {'gpu':>3} {'pod':<28} {'util':>5} {'mem':>5} {'power':>11}  state")
    for row in gpus:
        pod = f"{row.get('namespace') or ''}/{row['pod']}" if row.get("pod") else "-"
        power = f"{_n(row['power_w'])}/{_n(row['power_limit_w'])} W"
        print(
            clean(
                f"{row['host'][:16]:<16} {row['gpu']:>3} {pod[:28]:<28} {_n(row['util']):>5} "
                f"{_n(row['mem_util']):>5} {power:>11}  {row['state']}"
            )
        )
    for jb in jobs:
        state = jb["state"].upper()
        since = f" since {iso(jb['since'])}" if jb.get("since") else ""
        sus = ", ".join(f"{s['host']} GPU {s['gpu']} {s['state']}" for s in jb["suspects"][:8])
        print(clean(f"job {jb['job']}: {state}{since}" + (f"; suspects: {sus}" if sus else "")))
    sys.stdout.flush()
    return 0


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"
