"""Many nodes' `check --json` lines -> one job-wide verdict (pure: no I/O, no clocks).

On the node a person logged in to, every local GPU of a multi-node job often spins, and the
culprit is elsewhere. Each node's `gputui check --json` says what it sees; this module puts
the lines of all nodes side by side in time, and at each step judges the job as a whole from
each node's latest line (gputui.diagnose.merge.judge: the job, its spinning GPUs, its
suspects, the waiting, silent and unseen): stack dumps (issue 9's `stacks` entries) are
grouped across nodes STAT-style, so the rank that is elsewhere stands out: `ranks 0-61,63 on
16 hosts in all_reduce (train.py:44)` against `rank 62 on node-17 in load_batch (data.py:88)`.
The verdict's fields and its JSON are gputui.diagnose.merge.merged's.

Lines are aligned in time by coalescing: nodes see one stall at slightly different moments,
so changes that come within `window` seconds of each other make one merged step. The work is
O(lines + hosts x GPUs per step) and the number of steps is the number of distinct moments
of change, not the number of lines. An alarm that comes and goes inside one step (a stall
that ended within `window` seconds) is never coalesced away: it is a step of its own, so the
steps hold every verdict seen and `exit_code` is the worst of them, as a replay exits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace as _replace

from gputui.diagnose.merge.host_blame import blamed_host
from gputui.diagnose.merge.judge import judge
from gputui.diagnose.merge.merged import Merged
from gputui.diagnose.merge.node_line import NodeLine, line_from_json  # noqa: F401
from gputui.diagnose.merge.stacks import stack_groups  # noqa: F401  (names merge's callers import)
from gputui.diagnose.states import is_alarm
from gputui.diagnose.verdict import HUNG

WINDOW_S = 2.0


def merge(
    lines: Iterable[NodeLine],
    expect: Iterable[str] = (),
    silent: Iterable[str] = (),
    window: float = WINDOW_S,
) -> list[Merged]:
    """The merged verdict at each step where it changed, oldest first (at least one).

    Args:
        lines: every node's `check --json` lines, in any order.
        expect: hosts that must be heard from (`--expect`); a silent one is named.
        silent: hosts known to have sent nothing.
        window: seconds within which lines are one step.

    Returns:
        The Merged verdicts, one per change, oldest first.
    """
    ordered = sorted(lines, key=lambda ln: ln.t)
    expect, silent = tuple(expect), tuple(silent)
    latest: dict[str, NodeLine] = {}
    out: list[Merged] = []
    i = 0
    while i < len(ordered):
        j = i  # a step: lines each within `window` of the previous one
        while j + 1 < len(ordered) and ordered[j + 1].t - ordered[j].t <= window:
            j += 1
        step = ordered[i : j + 1]
        passing = _passing_alarm(dict(latest), step, expect, silent)
        for ln in step:
            latest[ln.host] = ln
        m = judge(latest, ordered[j].t, expect, silent)
        for found in (passing, m):
            if found is not None and (
                not out
                or found.key() != out[-1].key()
                or found.stack_groups != out[-1].stack_groups
            ):
                out.append(found)
        i = j + 1
    if not out:
        out.append(judge({}, 0.0, expect, silent))
    hosts = expect or tuple(sorted({ln.host for ln in ordered if ln.host != "*"}))
    return [_with_blame(m, hosts) for m in out]


def _with_blame(m: Merged, hosts: tuple[str, ...]) -> Merged:
    """The step with the host its verdict blames, and the probe of it as a next step."""
    b = blamed_host(m, hosts)
    if b is None:
        return m
    return _replace(m, blamed_host=b, next_steps=(*m.next_steps, b.offer()))


def _passing_alarm(
    latest: dict[str, NodeLine], step: list[NodeLine], expect: tuple[str, ...], silent: tuple
) -> Merged | None:
    """The worst job-wide alarm inside a step whose end is not alarmed (a stall that began and
    ended within the window), judged at the line that raised it; None when there is none.
    Only such steps are judged line by line: the usual step costs one judgement."""
    if not any(is_alarm(ln.state) for ln in step):
        return None
    end = dict(latest)
    for ln in step:
        end[ln.host] = ln
    if any(is_alarm(ln.state) for ln in end.values()):
        return None  # the step ends alarmed: its judgement shows the alarm
    worst: Merged | None = None
    for ln in step:
        latest[ln.host] = ln
        if is_alarm(ln.state):
            m = judge(latest, ln.t, expect, silent)
            if worst is None or (m.state == HUNG and worst.state != HUNG):
                worst = m
    return worst


def exit_code(steps: Iterable[Merged]) -> int:
    """The worst verdict seen over the span (gputui.diagnose.exitcodes), as `check` exits over
    a replay: a hang that ended still exits 1; a sick GPU at any step is 3 unless a hang was
    seen; a slow job is 0 (merge has no --fail-on-slow).

    Args:
        steps: the merged verdicts, oldest first (merge).

    Returns:
        The exit code (gputui.diagnose.exitcodes).
    """
    from gputui.diagnose import exitcodes

    codes = [exitcodes.of_state(m.state) for m in steps]
    codes += [exitcodes.SICK_GPU for m in steps if m.sick]
    return exitcodes.worst(*codes)
