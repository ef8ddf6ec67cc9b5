"""The pair probe of the GPU the verdict blames: refused while ranks hold the GPUs, then run
pair by pair against each peer, and kept as a `blamed_probe` record that joins the verdict.

Why refuse: a probe beside a job's ranks measures the job's traffic as much as the link, and
the ranks of a hung job hold the GPUs' memory and NCCL's channels. The way out (the
dashboard's X, gputui.tools.attach.endjob: named pids, confirmation) ends them first; this never
ends anything itself. Why one GPU: the blamed GPU's pairs are N-1 runs where the whole
matrix is N(N-1)/2, and its other pairs are the yardstick for the one that stands out
(gputui.diagnose.health.blamed_probe).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gputui.collect.model import ProcessInfo
from gputui.diagnose.health.blame import Blame
from gputui.diagnose.health.blamed_probe import KIND
from gputui.probe.result import ProbeReport
from gputui.probe.runner import ProbeConfig, Progress, run_probe, torch_installed

END_FIRST = (
    "end them first: the dashboard's X key (after the incident bundle, b) ends the stuck "
    "job's ranks, naming their pids and asking first"
)


def holders(processes: Iterable[ProcessInfo], gpus: Iterable[int]) -> list[ProcessInfo]:
    """Live ranks of a distributed job on any of `gpus`: the probe waits for them to end.

    Args:
        processes: the sample's processes.
        gpus: the GPUs the probe needs.

    Returns:
        The ProcessInfos holding them that carry a rank.
    """
    want = set(gpus)
    return [p for p in processes if p.live and p.rank is not None and set(p.gpus) & want]


def refusal(blame: Blame, held: Sequence[ProcessInfo]) -> str:
    """Why the probe will not run while ranks hold the GPUs, and what to do first.

    Args:
        blame: the blamed GPU.
        held: the ranks holding the GPUs (holders).

    Returns:
        One sentence naming the GPU and the ranks' pids (at most 16).
    """
    pids = ", ".join(str(p.pid) for p in held[:16]) + (" ..." if len(held) > 16 else "")
    ranks = "rank" if len(held) == 1 else "ranks"
    return (
        f"the probe of GPU {blame.gpu} is refused: {ranks} (pid {pids}) hold the GPUs; {END_FIRST}"
    )


def base_record(blame: Blame, job: str | None, t: float) -> dict[str, Any]:
    return {"type": KIND, "t": round(t, 3), "job": job, **blame.to_json()}


def refused_record(blame: Blame, held: Sequence[ProcessInfo], job: str | None) -> dict[str, Any]:
    """The record of a probe refused because ranks hold the GPUs.

    Args:
        blame: the blamed GPU.
        held: the ranks holding the GPUs.
        job: the job's key, for the record.

    Returns:
        A `blamed_probe` record with outcome `refused`, the refusal and the pids.
    """
    rec = base_record(blame, job, time.time())
    rec.update(outcome="refused", error=refusal(blame, held), held_by=[p.pid for p in held])
    rec["pairs"] = []
    return rec


def report_record(blame: Blame, report: ProbeReport, job: str | None, t: float) -> dict[str, Any]:
    """The record of a finished run: each pair of the blamed GPU, its slower copy direction.

    Args:
        blame: the blamed GPU.
        report: the finished run.
        job: the job's key.
        t: the record's time (Unix seconds).

    Returns:
        A `blamed_probe` record with outcome `done`.
    """
    pairs = []
    for p in report.pairs:
        copies = [c.gbps for c in p.copies if c.ok and c.gbps is not None]
        pairs.append(
            {
                "pair": list(p.pair),
                "ok": p.ok,
                "gbps": round(min(copies), 2) if copies and p.ok else None,
                "busbw_gbps": p.allreduce.busbw_gbps if p.allreduce is not None else None,
                "reason": p.reason,
            }
        )
    rec = base_record(blame, job, t)
    outcome = "cancelled" if report.cancelled else "done"
    rec.update(outcome=outcome, error=None, held_by=[], backend=report.backend, pairs=pairs)
    rec.update(devices=list(report.devices), wall_s=round(report.wall_s, 3))
    return rec


def probe_blamed(
    blame: Blame,
    devices: Sequence[int],
    *,
    backend: str = "nccl",
    timeout: float = 30.0,
    size: int | None = None,
    job: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
) -> tuple[dict[str, Any], ProbeReport | None]:
    """Run the blamed GPU's pairs; (record, report). Never raises for a failing pair; a GPU
    that is not among `devices`, or no peer, is a `failed` record.

    Args:
        blame: the blamed GPU (gputui.diagnose.health.blamed).
        devices: the GPUs that may be probed.
        backend: `nccl`, or `gloo` for a drill without GPUs.
        timeout: seconds each pair may take.
        size: bytes per copy and all_reduce; None: the backend's default.
        job: the job's key, for the record.
        on_progress: called with each pair's Progress; None: none.
        cancel: set to stop at once.

    Returns:
        (the `blamed_probe` record, the ProbeReport or None when no pair ran).
    """
    t = time.time()
    if blame.gpu not in devices or len(devices) < 2:
        rec = base_record(blame, job, t)
        have = ",".join(map(str, devices)) or "none"
        rec.update(outcome="failed", error=f"GPU {blame.gpu} has no peer to probe (GPUs {have})")
        rec["pairs"] = []
        return rec, None
    if not torch_installed():
        rec = base_record(blame, job, t)
        rec.update(outcome="failed", error="the probe needs torch: pip install 'gputui[probe]'")
        rec["pairs"] = []
        return rec, None
    cfg = ProbeConfig(list(devices), backend, size=size, timeout=timeout, only=blame.gpu)
    report = run_probe(cfg, on_progress=on_progress, cancel=cancel)
    return report_record(blame, report, job, t), report
