"""`gputui check --prometheus`: the hang detector over a window of a cluster's history.

Prints each event at its sample's time (a job stalls, hangs, clears; an Xid; a node that
left the scrape; an error counter that rose or reset), then a line per job: hung or stalled
with its onset and suspects, slow with its straggler, or healthy (never blamed). --json
prints one object per event, each with `t` (Unix seconds) and `time` (UTC), then one
`summary` object. The exit status is the worst over the window (gputui.diagnose.exitcodes).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gputui.commands.prom_args import check_alone, read_window, window_of
from gputui.diagnose.exitcodes import SICK_GPU

if TYPE_CHECKING:
    from gputui.diagnose.history.window import Judgement


def run(args: argparse.Namespace) -> int:
    from gputui.collect.prom.timespec import iso
    from gputui.diagnose.history.window import judge_window
    from gputui.diagnose.states import State
    from gputui.jsonout import dumps
    from gputui.textsafe import clean

    check_alone(args)
    start, end = window_of(args)
    hist = read_window(args, start, end)
    by_label = args.job_label is not None
    j = judge_window(
        hist,
        args.stall_after,
        args.hang_after,
        by_label=by_label,
        fail_on_slow=args.fail_on_slow,
        job=args.prom_job,
    )
    hosts = sorted({g.host for g in hist.gpus})
    where = (
        f"{len(hist.gpus)} GPU(s) on {len(hosts)} node(s), {len(j.jobs)} job(s), "
        f"{hist.family.name} series, {iso(start)} .. {iso(end)} every {hist.step:g} s"
    )
    if args.json:
        for e in j.events:
            print(dumps({"t": e.t, "time": iso(e.t), "kind": e.kind, **e.data, "text": e.text}))
        for r in j.jobs:
            if r.slow_text:
                print(
                    dumps(
                        {
                            "t": end,
                            "time": iso(end),
                            "kind": "slow",
                            **r.to_json(),
                            "text": r.slow_text,
                        }
                    )
                )
        print(
            dumps(
                {
                    "t": end,
                    "time": iso(end),
                    "kind": "summary",
                    "source": hist.family.name,
                    "from": start,
                    "to": end,
                    "step": hist.step,
                    "gpus": len(hist.gpus),
                    "nodes": hosts,
                    "jobs": [r.to_json() for r in j.jobs],
                    "healthy": [r.key for r in j.jobs if r.worst == State.OK and not r.stragglers],
                    "notes": j.notes,
                    "exit": j.code,
                }
            )
        )
        sys.stdout.flush()
        return j.code
    print(clean(f"gputui check: {where}"))
    for note in j.notes:
        print(clean(f"note: {note}"))
    for e in j.events:
        print(clean(f"{iso(e.t)}  {e.text}"))
    for r in j.jobs:
        if r.slow_text:
            print(clean(f"{iso(end)}  {r.slow_text}"))
    print("jobs:")
    for r in j.jobs:
        print(clean(f"  {_job_line(r)}"))
    print(clean(f"final: {_final(j)}"))
    sys.stdout.flush()
    return j.code


def _job_line(r) -> str:  # type: ignore[no-untyped-def]
    from gputui.collect.prom.timespec import iso
    from gputui.diagnose.states import State

    size = f"{len(r.gpus)} GPU(s) on {len(r.nodes)} node(s)"
    if r.worst != State.OK:
        groups: dict[tuple[str, str, str], list[str]] = {}
        for sus in r.suspects:
            groups.setdefault((sus["host"], _pod(sus), sus["state"]), []).append(sus["gpu"])
        blamed = (
            ", ".join(
                f"{host} GPU{'s' if len(ix) > 1 else ''} {', '.join(ix)}{pod} {state}"
                for (host, pod, state), ix in list(groups.items())[:8]
            )
            or "no single GPU (every GPU spun)"
        )
        onset = iso(r.onset) if r.onset is not None else "?"
        return f"{r.worst.upper()}: {r.key} ({size}): onset {onset}; suspects: {blamed}"
    if r.stragglers:
        return f"SLOW: {r.key} ({size}): straggler {', '.join(r.stragglers[:4])}"
    return f"healthy: {r.key} ({size}): never stalled, never blamed"


def _pod(ref: dict[str, str | None]) -> str:
    if not ref.get("pod"):
        return ""
    ns = ref.get("namespace")
    return f" (pod {ns}/{ref['pod']})" if ns else f" (pod {ref['pod']})"


def _final(j: Judgement) -> str:
    """The window's worst in a few words, as `check`'s last line says it."""
    from gputui.diagnose.states import State

    hung = [r.key for r in j.jobs if r.worst != State.OK]
    sick = sorted(
        {
            f"{e.data['host']} GPU {e.data['gpu']} "
            + (f"(Xid {e.data['xid']})" if e.kind == "xid" else f"({e.data['counter']})")
            for e in j.events
            if e.code == SICK_GPU
        }
    )
    slow = [r.key for r in j.jobs if r.stragglers]
    said = []
    if hung:
        said.append(f"hang in {', '.join(hung[:6])}")
    if sick:
        said.append(f"sick GPU: {', '.join(sick[:6])}")
    if slow:
        said.append(f"slow: {', '.join(slow[:6])}")
    return "; ".join(said) or f"ok: {len(j.jobs)} job(s), none stalled"
