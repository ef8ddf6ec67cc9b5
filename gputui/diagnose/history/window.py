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
from gputui.diagnose.history.jobs import per_node
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
) -> Judgement:
    by_owner = not per_node(hist, by_label)
    readers = [GpuReader(g, by_owner) for g in hist.gpus]
    events, jobs = judge_hangs(hist, stall_after, hang_after, by_label, readers)
    events += xid_events(hist) + counter_events(hist) + missing_nodes(hist)
    events.sort(key=lambda e: (e.t, e.kind != "node_missing", e.kind != "xid"))
    notes = sorted({r.limit_note for r in readers if r.limit_note})
    if not by_owner:
        notes.append("no pod labels: the GPUs of each node are judged as one job")
    slow = any(r.stragglers for r in jobs)
    code = worst(*(e.code for e in events), SLOW if slow and fail_on_slow else OK)
    return Judgement(events, jobs, notes, code)
