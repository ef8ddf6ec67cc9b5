"""The dashboard's part of a slow job: the flags of the process table.

A slow verdict (gputui.diagnose.slow.straggler) marks the straggler's rows SLOW and each waiting
rank's row with its wait share (e.g. `98%`), in the flag column that a hang uses for
SUSPECT and wait: at 80 columns the straggler stands out without a column more. The `w`
key's pane (where the straggler's time goes) is a tool pane: gputui.ui.screens.tool_pane.
"""

from __future__ import annotations

from typing import Any

from gputui.collect.model import Snapshot

STRAGGLER = "straggler"
WAIT_PREFIX = "wait:"
STYLES = {STRAGGLER: "@slow", "wait": "@mid"}


def slow_flags(v: Any, snap: Snapshot) -> dict[int, str]:
    """pid -> flag for the ranks of a slow job: the stragglers, and each waiter's share."""
    stragglers = set(getattr(v, "stragglers", ()) or ())
    shares: dict[int, float] = getattr(v, "wait_share", None) or {}
    flags: dict[int, str] = {}
    for p in snap.processes:
        gpus = set(p.gpus)
        if gpus & stragglers:
            flags[p.pid] = STRAGGLER
        elif waits := [shares[i] for i in gpus if i in shares]:
            flags[p.pid] = f"{WAIT_PREFIX}{round(100 * max(waits))}"
    return flags


def flag_label(flag: str) -> tuple[str, str] | None:
    """(narrow, wide) text of a slow job's flag, or None for any other flag."""
    if flag == STRAGGLER:
        return ("SLOW", "SLOW")
    if flag.startswith(WAIT_PREFIX):
        n = flag[len(WAIT_PREFIX) :]
        return (f"{n}%", f"w {n}%")
    return None


def flag_style(flag: str) -> str | None:
    return STYLES.get(flag.split(":", 1)[0])
