"""Which of the key bar's keys have something to act on now; the others are not offered.

Why: with no GPU and no job, the key bar offered `j suspect`, `p stack` and `a all ranks`,
and each, pressed, said there was nothing to do. A key bar is read as "what can I do here".
Every key still works when pressed (and says why it cannot act); the bar offers only those
that will: `j` while an alarm names a suspect that has a row, `p` on a process py-spy can
read (a Python process, a GPU process or a rank; in a replay, one whose stack the recording
holds), `a` when the selected process's job has several ranks (a replay: recorded stacks),
`k`/`T` on a live process, `e` on any, `P` where there are GPUs to probe.
"""

from __future__ import annotations

from typing import Any

from gputui.collect.model import ProcessInfo, Snapshot
from gputui.diagnose.states import State


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


def hidden_keys(
    replay: bool,
    snap: Snapshot | None,
    verdict: Any,
    selected: ProcessInfo | None,
    probe: bool = False,
) -> frozenset[str]:
    """The keys of gputui.ui.widgets.bars.KEY_HINTS that have nothing to act on now.
    `probe`: the probe was set up for this run (--probe-hosts, a CPU probe)."""
    hide = set()
    if not suspect_row(verdict, snap):
        hide.add("j")
    if selected is None:
        hide |= {"p", "k", "e", "T"}
    if replay:  # the recording's stacks: `a` shows them all, `p` the selected one's
        hide |= {"k", "T"}
        recorded = getattr(verdict, "stacks", ()) or ()
        if selected is not None and not any(e.get("pid") == selected.pid for e in recorded):
            hide.add("p")
        if not recorded:
            hide.add("a")
    elif selected is None:
        hide.add("a")
    else:
        if not (selected.gpus or selected.rank is not None or _pythonish(selected)):
            hide.add("p")
        jobs = snap.jobs if snap is not None else ()
        if not any(selected.pid in j.pids and len(j.pids) > 1 for j in jobs):
            hide.add("a")
    if not probe and (replay or snap is None or not snap.gpus):
        hide.add("P")
    return frozenset(hide)
