"""A window of history judged: every event in time order, a report per job, the exit code.

The exit code is the one table's (gputui.diagnose.exitcodes): the worst seen over the
window, a hang (1) before a sick GPU (3) before a slow job (4, only when asked) before
healthy (0), as a replay's is.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.collect.prom.columns import History
from gputui.diagnose.exitcodes import OK, SLOW, worst
from gputui.diagnose.history.counters import counter_events, missing_nodes, xid_events
from gputui.diagnose.history.jobs import one_job_per_node
from gputui.diagnose.history.judge import Event, JobReport, judge_hangs
from gputui.diagnose.history.samples import GpuReader


@dataclass
class Judgement:
    events: list[Event]
    jobs: list[JobReport]
    notes: list[str]
    code: int


def judge_window(
    hist: History,
    stall_after: float = 10.0,
    hang_after: float = 60.0,
    *,
    by_label: bool = False,
    fail_on_slow: bool = False,
    job: str | None = None,
) -> Judgement:
    """The hang detector's rule over a window of a cluster's history, job by job.

    `job`: only that job's verdicts, and the Xids, counters and missing nodes of its
    GPUs (the others are judged too: a job is told from its peers' labels).

    Args:
        hist: the window's columns (gputui.collect.prom.read_history).
        stall_after: seconds of spinning after which a job is stalled.
        hang_after: seconds of spinning after which it is hung.
        by_label: whether `--job-label` names the jobs.
        fail_on_slow: whether a straggler makes the exit code non-zero.
        job: only that job's verdicts; None: every job's.

    Returns:
        The Judgement: the events (stalls, hangs, stragglers) in time order, each job's report,
        notes, and the exit code.
    """
    by_owner = not one_job_per_node(hist, by_label)
    readers = [GpuReader(g, by_owner) for g in hist.gpus]
    events, jobs = judge_hangs(hist, stall_after, hang_after, by_label, readers)
    events += xid_events(hist) + counter_events(hist) + missing_nodes(hist)
    if job is not None:
        events, jobs = _only(job, events, jobs)
    events.sort(key=lambda e: (e.t, e.kind != "node_missing", e.kind != "xid"))
    notes = sorted({r.limit_note for r in readers if r.limit_note})
    if not by_owner:
        notes.append("no pod labels: the GPUs of each node are judged as one job")
    slow = any(r.stragglers for r in jobs)
    code = worst(*(e.code for e in events), SLOW if slow and fail_on_slow else OK)
    return Judgement(events, jobs, notes, code)


def _only(
    key: str, events: list[Event], jobs: list[JobReport]
) -> tuple[list[Event], list[JobReport]]:
    from gputui.errors import GputuiError

    mine = [r for r in jobs if r.key == key]
    if not mine:
        have = ", ".join(r.key for r in jobs[:8]) + (" ..." if len(jobs) > 8 else "")
        raise GputuiError(f"--job {key[:60]!r}: no such job in the window (jobs: {have or 'none'})")
    gpus, nodes = set(mine[0].gpus), set(mine[0].nodes)

    def concerns(e: Event) -> bool:
        if "job" in e.data:
            return bool(e.data["job"] == key)
        if e.kind == "node_missing":
            return e.data.get("host") in nodes
        return f"{e.data.get('host')}:{e.data.get('gpu')}" in gpus

    return [e for e in events if concerns(e)], mine
