"""The verdict banner: one line when all is well, three at a stall, details behind `d`.

At a stall the banner answers first (who is the suspect, where it is stuck), then says what
to press. Three lines leave room at 80x24 for one line per GPU and the suspect's row; the
full reason, every finding and the next steps are on the details screen (`d`).
"""

from __future__ import annotations

from typing import Any

from textual.strip import Strip

from gputui.ui.strips import Line, LineView, fit

OK_STYLE = "bold black on green"
SLOW_STYLE = "bold white on magenta"
STALLED_STYLE = "bold black on yellow"
HUNG_STYLE = "bold white on red"
KEYS = "j select suspect · p its stack · a all ranks · d details · b bundle"


def headline(v: Any, now: float) -> tuple[str, str]:
    """(badge, text) of the first line: the state, then the suspect before anything else."""
    since = getattr(v, "since", None)
    badge = f" {v.state.upper()}" + (f" {now - since:.0f} s " if since is not None else " ")
    parts = []
    if v.suspects:
        pids = f" pid {', '.join(map(str, v.suspect_pids))}" if v.suspect_pids else ""
        parts.append(f"suspect GPU {', '.join(map(str, v.suspects))}{pids}")
    elif v.suspect_pids:  # named by the stacks or NCCL, where NVML could not
        parts.append(f"suspect pid {', '.join(map(str, v.suspect_pids))}")
    else:
        parts.append("no suspect on this node")
    if v.spinning:
        parts.append(f"spinning GPU {', '.join(map(str, v.spinning))}")
    if getattr(v, "job", None):
        parts.append(f"job {v.job.split(' (')[0]}")
    return badge, "  " + " · ".join(parts)


def answer(v: Any) -> str:
    """The second line: the culprit's frame when stacks say it, else the detector's why."""
    findings = list(getattr(v, "findings", ()) or ())
    if findings:
        return "▶ " + findings[0]
    reason = v.reason
    for marker in ("; not spinning: ", "; every GPU", "; its peers"):
        i = reason.find(marker)
        if i >= 0:
            return "▶ " + reason[i + 2 :].rstrip(".")
    return "▶ " + reason


def banner_height(v: Any | None) -> int:
    """Lines the banner takes for this verdict (known before it is drawn, so the GPU board
    can choose its form in the same pass)."""
    return 0 if v is None else 3 if v.alarm else 1


def banner_lines(v: Any | None, now: float, width: int) -> list[Strip]:
    if v is None:
        return []
    if not v.alarm:
        slow = v.state == "slow"  # a straggler: not an alarm, but worth a badge of its own
        badge, style = (" SLOW ", SLOW_STYLE) if slow else (" OK ", OK_STYLE)
        line = Line().add(badge, style)
        line.add(fit(f"  {v.reason}", max(0, width - len(badge))), "" if slow else "dim")
        return [line.strip(width)]
    badge, text = headline(v, now)
    first = Line().add(badge, HUNG_STYLE if v.state == "hung" else STALLED_STYLE)
    first.add(fit(text, max(0, width - first.length)), "bold")
    second = Line().add(fit(answer(v), width), "bold red" if v.findings else "")
    third = Line().add(fit(KEYS, width), "italic")
    return [first.strip(width), second.strip(width), third.strip(width)]


class VerdictBanner(LineView):
    DEFAULT_CSS = "VerdictBanner { height: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.verdict: Any | None = None
        self.now = 0.0

    def show(self, verdict: Any | None, now: float) -> None:
        self.verdict, self.now = verdict, now
        self.redraw()

    def build(self, width: int) -> list[Strip]:
        return banner_lines(self.verdict, self.now, width)
