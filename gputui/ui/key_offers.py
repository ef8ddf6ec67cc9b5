"""When each key of the key bar has something to act on; the others are not offered.

Why: with no GPU and no job, the key bar offered `j suspect`, `p stack` and `a all ranks`,
and each, pressed, said there was nothing to do. A key bar is read as "what can I do here".
Every key still works when pressed (and says why it cannot act); the bar offers only those
that will: `j` while an alarm names a suspect that has a row, `p` on a process py-spy can
read (a Python process, a GPU process or a rank; in a replay, one whose stack the recording
holds), `a` when the selected process's job has several ranks (a replay: recorded stacks),
`k`/`T` on a live process, `e` on any, `P` where there are GPUs to probe.

Each rule is a predicate of the `Moment` on screen; the key table (gputui.ui.keys) names the
rule of each key it offers, so a key and its offer are declared in one row. Pure functions of
the Snapshot and the Verdict: no widget, no tool, nothing slow (they run with each drawn
sample, on the UI thread).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputui.collect.model import ProcessInfo, Snapshot
from gputui.diagnose.states import State


@dataclass(frozen=True)
class Moment:
    """What the dashboard shows now, as the offers read it.

    `probe`: the probe was set up for this run (--probe-hosts, a CPU probe)."""

    replay: bool
    snap: Snapshot | None
    verdict: Any
    selected: ProcessInfo | None
    probe: bool = False


Offered = Callable[[Moment], bool]


def _pythonish(p: ProcessInfo) -> bool:
    words = [p.name or "", *(p.cmdline[:2] if p.cmdline else ())]
    return any("python" in w.rsplit("/", 1)[-1].lower() for w in words)


def suspect_row(verdict: Any, snap: Snapshot | None) -> bool:
    """Whether the alarm's suspect (or a slow job's straggler) has a row to select."""
    if verdict is None or snap is None or verdict.state == State.OK:
        return False
    gpus = set(verdict.suspects) | set(getattr(verdict, "stragglers", ()) or ())
    pids = set(verdict.suspect_pids)
    return any(p.pid in pids or set(p.gpus) & gpus for p in snap.processes)


def _recorded(m: Moment) -> tuple[dict[str, Any], ...]:
    return tuple(getattr(m.verdict, "stacks", ()) or ())


def a_suspect_to_select(m: Moment) -> bool:
    """`j`: an alarm whose suspect (or straggler) has a row."""
    return suspect_row(m.verdict, m.snap)


def a_stack_to_show(m: Moment) -> bool:
    """`p`: a selected process py-spy can read; in a replay, one whose stack is recorded."""
    p = m.selected
    if p is None:
        return False
    if m.replay:
        return any(e.get("pid") == p.pid for e in _recorded(m))
    return bool(p.gpus or p.rank is not None or _pythonish(p))


def ranks_to_dump(m: Moment) -> bool:
    """`a`: the selected process's job has several ranks; in a replay, recorded stacks."""
    if m.replay:
        return bool(_recorded(m))
    p = m.selected
    if p is None:
        return False
    jobs = m.snap.jobs if m.snap is not None else ()
    return any(p.pid in j.pids and len(j.pids) > 1 for j in jobs)


def a_live_process(m: Moment) -> bool:
    """`k`, `T`: a selected process that runs here (a replay's ran on the recorded node)."""
    return m.selected is not None and not m.replay


def a_process(m: Moment) -> bool:
    """`e`: any selected process (a replay shows its recorded environment)."""
    return m.selected is not None


def gpus_to_probe(m: Moment) -> bool:
    """`P`: the probe was set up for this run, or this live node has GPUs."""
    return m.probe or (not m.replay and m.snap is not None and bool(m.snap.gpus))
