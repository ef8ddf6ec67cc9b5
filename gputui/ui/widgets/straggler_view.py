"""The dashboard's part of a slow job: flags of the process table, and the profile pane.

A slow verdict (gputui.diagnose.slow.straggler) marks the straggler's rows SLOW and each waiting
rank's row with its wait share (e.g. `98%`), in the flag column that a hang uses for
SUSPECT and wait: at 80 columns the straggler stands out without a column more. The `w`
key runs a few seconds of py-spy sampling of the selected process (gputui.tools.attach.profile)
in a ToolPane, off the UI thread, and lists its top functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputui.collect.model import ProcessInfo, Snapshot

if TYPE_CHECKING:
    from gputui.ui.screens.tool_pane import ToolPane

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


def profile_pane(proc: ProcessInfo, seconds: float | None = None) -> ToolPane:
    """`w`: where the selected process spends its time, by py-spy record."""
    from gputui.tools.attach.profile import PROFILE_SECONDS, profile
    from gputui.tools.result import Cancel, LineSink, ToolResult
    from gputui.ui.screens.tool_pane import ToolPane

    secs = seconds or PROFILE_SECONDS

    def call(on_line: LineSink, cancel: Cancel) -> ToolResult:
        prof = profile(proc, seconds=secs, cancel=cancel)
        for line in prof.lines():
            on_line(line)
        return prof.result

    return ToolPane(
        f"py-spy record {secs:g} s (top functions)  pid {proc.pid}  {proc.command[:60]}", call
    )
