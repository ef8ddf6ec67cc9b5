"""What the verdict marks on the GPU board (a tag per GPU) and in the process table (a flag
per process): the suspect, the ranks that wait, a busy rank, a slow job's straggler.

Why apart from the app: these are pure functions of the Verdict and the Snapshot on screen,
so they are read (and tested) without a running dashboard; the app only hands them over.
"""

from __future__ import annotations

from typing import Any

from gputui.collect.model import Snapshot
from gputui.diagnose.states import State
from gputui.ui.widgets.straggler_view import slow_flags


def gpu_tags(v: Any | None, snap: Snapshot | None) -> dict[int, tuple[str, str]]:
    """GPU index -> (tag, what follows it): its class, or suspect/spinning/waiting/busy."""
    tags: dict[int, tuple[str, str]] = {}
    if v is None or snap is None:
        return tags
    for i, st in (getattr(v, "gpu_states", None) or {}).items():
        tags[i] = (str(getattr(st, "value", st)), "")
    if v.state == State.BUSY:  # its peers wait, the busy rank advances: no suspect
        for i in v.spinning:
            tags[i] = ("waiting", "")
        gpu = (getattr(v, "busy", None) or {}).get("gpu")
        for i in v.suspects if gpu is None else (gpu,):
            tags[i] = ("busy", "")
    elif v.state != State.OK:
        since = f" {snap.t - v.since:.0f}s" if v.since is not None else ""
        for i in v.spinning:
            tags[i] = ("spinning", since)
        for i in v.suspects:
            tags[i] = ("suspect", f" {tags.get(i, ('gone', ''))[0]}")
    return tags


def row_flags(v: Any | None, snap: Snapshot | None) -> dict[int, str]:
    """pid -> flag of the process table: suspect, waiting, busy, or a slow job's shares."""
    if v is not None and snap is not None and (v.state == State.SLOW or v.waiting_gpus):
        return slow_flags(v, snap)  # a straggler, or ranks that all wait: their shares
    if v is None or snap is None or v.state == State.OK:
        return {}
    flags: dict[int, str] = {}
    busy = (getattr(v, "busy", None) or {}).get("pid") if v.state == State.BUSY else None
    for p in snap.processes:
        if busy is not None and p.pid == busy:
            flags[p.pid] = "busy"
        elif set(p.gpus) & set(v.suspects) or p.pid in v.suspect_pids:
            flags[p.pid] = "suspect"
        elif set(p.gpus) & set(v.spinning):
            flags[p.pid] = "waiting"
    return flags
