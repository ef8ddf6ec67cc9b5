"""The dashboard over a cluster's history: `gputui --prometheus URL --from T --to T`.

The dashboard shows one node, so one node's window is replayed: the one --nodes names, else
the node of the first GPU the history's verdict blames (a hung job's idle GPU), else the
first node with a GPU that spun, else the first node. Its columns become Snapshots on a grid
of at most REPLAY_DT_S (a 15 s scrape is repeated, as Prometheus itself repeats the last
value between scrapes), so that the live detector in the dashboard, which needs spinning
samples no more than 5 s apart, reads them as it reads a recording; the timeline, seeking and
--speed are the recording's. Each GPU in use shows a process standing for its pod (no pid on
this machine: nothing attaches to it).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

from gputui.commands.prom_args import check_alone, read_window, window_of

if TYPE_CHECKING:
    from gputui.collect.model import Snapshot
    from gputui.collect.prom.columns import History
    from gputui.collect.source import ReplaySource
    from gputui.diagnose.history.window import Judgement

REPLAY_DT_S = 1.0
PSEUDO_PID = 4_000_000  # + owner * 64 + GPU index: above any real pid_max default


def prom_source(args: argparse.Namespace, realtime: bool = True) -> ReplaySource:
    from gputui.collect.source import ReplaySource
    from gputui.diagnose.history.jobs import one_job_per_node
    from gputui.diagnose.history.window import judge_window

    check_alone(args)
    start, end = window_of(args)
    hist = read_window(args, start, end)
    by_label = args.job_label is not None
    judged = judge_window(
        hist, args.stall_after, args.hang_after, by_label=by_label, job=args.prom_job
    )
    host = _node(hist, judged.events)
    others = sorted({g.host for g in hist.gpus} - {host})
    if others:
        more = " ..." if len(others) > 3 else ""
        from gputui.textsafe import clean

        print(
            clean(
                f"gputui: replaying node {host} (also in the window: "
                f"{', '.join(others[:3])}{more}; --nodes picks one)"
            ),
            file=sys.stderr,
        )
    snaps = node_snapshots(hist, host, by_label, not one_job_per_node(hist, by_label))
    src = ReplaySource(
        snaps,
        f"prometheus {host}",
        speed=getattr(args, "speed", None) or 1.0,
        start_s=getattr(args, "start", None) or 0.0,
        realtime=realtime,
    )
    src.node = host
    src.history = history_lines(hist, judged)  # type: ignore[attr-defined]  # for a bundle
    return src


def history_lines(hist: History, judged: Judgement) -> list[dict[str, Any]]:
    """The whole window's verdict as `check --prometheus --json` prints it (a bundle keeps
    it beside the replayed node's samples: the cluster's view of the same hang)."""
    from gputui.collect.prom.timespec import iso

    end = hist.time(hist.n - 1)
    out = [
        {"t": e.t, "time": iso(e.t), "kind": e.kind, **e.data, "text": e.text}
        for e in judged.events
    ]
    out.append(
        {
            "t": end,
            "time": iso(end),
            "kind": "summary",
            "source": hist.family.name,
            "jobs": [r.to_json() for r in judged.jobs],
            "notes": judged.notes,
            "exit": judged.code,
        }
    )
    return out


def bundle_samples(args: argparse.Namespace) -> list[Snapshot]:
    """`gputui bundle --prometheus`: the replayed node's samples up to the moment its verdict
    names the hang (the last MAX of them), what they are made from, and the window's verdict
    as lines for the bundle (args.history)."""
    from gputui.commands.moment import verdict_moment
    from gputui.watch.settings import WatchSettings

    src = prom_source(args, realtime=False)
    snaps = src.snaps
    moment = verdict_moment(snaps, WatchSettings.from_args(args))
    snaps = snaps if moment is None else snaps[: moment + 1]
    args.recorded_node = src.node
    from gputui.collect.prom.timespec import iso

    span = f"{iso(src.snaps[0].t)} .. {iso(src.snaps[-1].t)}"
    args.made_from = f"Prometheus {args.prom_shown}, node {src.node}, {span}"
    args.history = src.history  # type: ignore[attr-defined]
    return list(snaps)


def _node(hist: History, events: list) -> str:  # type: ignore[type-arg]
    for e in events:
        if e.kind == "verdict" and e.data.get("suspects"):
            return str(e.data["suspects"][0]["host"])
    for e in events:
        if e.kind == "verdict" and e.data.get("spinning"):
            return str(e.data["spinning"][0]["host"])
    return hist.gpus[0].host


def node_snapshots(hist: History, host: str, by_label: bool, by_owner: bool) -> list[Snapshot]:
    """One node's columns as Snapshots, every REPLAY_DT_S at most."""
    from gputui.collect.model import GpuSample, Job, ProcessInfo, Snapshot
    from gputui.collect.procs.owner import Owner
    from gputui.diagnose.history.jobs import job_key
    from gputui.diagnose.history.samples import GpuReader

    gpus = [g for g in hist.gpus if g.host == host]
    readers = [GpuReader(g, by_owner) for g in gpus]
    owners = [
        Owner(kind="pod", pod_name=o.pod, namespace=o.namespace, container=o.container)
        for o in hist.owners
    ]
    repeat = max(1, math.ceil(hist.step / REPLAY_DT_S - 1e-9))
    dt = hist.step / repeat
    out: list[Snapshot] = []
    for k in range(hist.n):
        samples: list[GpuSample] = []
        procs: list[ProcessInfo] = []
        jobs: dict[str, tuple[list[int], list[int]]] = {}
        for g, r in zip(gpus, readers, strict=True):
            index = int(g.gpu) if g.gpu.isdigit() else len(samples)
            if not r.present(k):
                samples.append(GpuSample(index=index, uuid=g.uuid, name=g.model))
                continue
            s = r.sample(k)
            o = r.owner[k]
            pids: tuple[int, ...] = ()
            if s.pids:
                pid = PSEUDO_PID + max(o, 0) * 64 + index
                pids = (pid,)
                own = owners[o] if o >= 0 else None
                procs.append(
                    ProcessInfo(
                        pid=pid,
                        name=(own.container if own else None) or "gpu process",
                        cmdline=(own.short(),) if own else (),
                        gpus=(index,),
                        owner=own,
                        live=False,
                    )
                )
                key = job_key(hist.owners[o], by_label) if o >= 0 else None
                key = key or f"node {host}"
                jp, jg = jobs.setdefault(key, ([], []))
                jp.append(pid)
                jg.append(index)
            samples.append(
                GpuSample(
                    index=index,
                    name=g.model,
                    uuid=g.uuid,
                    util=s.util,
                    mem_util=s.mem_util,
                    power_w=s.power_w,
                    power_limit_w=s.power_limit_w,
                    mem_used_mb=s.mem_used_mb,
                    temp_c=_at(g.cols.get("temp_c"), k),
                    sm_mhz=_at(g.cols.get("sm_mhz"), k),
                    mem_mhz=_at(g.cols.get("mem_mhz"), k),
                    pids=pids,
                )
            )
        job_list = tuple(
            Job(key, key, tuple(p), tuple(gs), how="pod labels in Prometheus")
            for key, (p, gs) in jobs.items()
        )
        for j in range(repeat if k < hist.n - 1 else 1):
            out.append(
                Snapshot(
                    t=hist.time(k) + j * dt,
                    gpus=tuple(samples),
                    processes=tuple(procs),
                    jobs=job_list,
                    source="replay",
                    hostname=host,
                )
            )
    return out


def _at(col: object, k: int) -> float | None:
    if col is None:
        return None
    x = col[k]  # type: ignore[index]
    return x if x == x else None


MAX_BUNDLE = 7200  # an hour and more of a node at 1 s before the verdict's moment
HISTORY_FILE = "prometheus-history.jsonl"


def write_history(path: object, lines: list[dict[str, Any]]) -> None:
    """The window's verdict lines into the bundle directory; a write that fails is a line
    on stderr, never the bundle's end (the rest of it is whole)."""
    from pathlib import Path

    from gputui.jsonout import dumps

    try:
        with open(Path(str(path)) / HISTORY_FILE, "w", encoding="utf-8") as f:
            for obj in lines:
                f.write(dumps(obj) + "\n")
    except OSError as e:
        print(f"gputui: {HISTORY_FILE}: not written ({e.strerror or e})", file=sys.stderr)
