"""Small pure formatting helpers for the UI (bars, sparklines, sizes, durations)."""

from __future__ import annotations

from collections.abc import Iterable

_SPARK = "▁▂▃▄▅▆▇█"


def bar(frac: float | None, width: int = 10) -> str:
    """A fixed-width bar; N/A shows as dots so a missing value never looks like zero."""
    if frac is None:
        return "·" * width
    frac = min(1.0, max(0.0, frac))
    full = int(round(frac * width))
    return "█" * full + "░" * (width - full)


def sparkline(values: Iterable[float | None], top: float, width: int) -> str:
    """The last `width` values scaled to `top`; None shows as a blank column."""
    vals = list(values)[-width:]
    out = []
    for v in vals:
        if v is None or top <= 0:
            out.append(" ")
        else:
            i = int(round(min(1.0, max(0.0, v / top)) * (len(_SPARK) - 1)))
            out.append(_SPARK[i])
    return "".join(out).rjust(width)


def num(v: float | None, unit: str = "", nd: int = 0) -> str:
    return "N/A" if v is None else f"{v:.{nd}f}{unit}"


def mib(v: float | None) -> str:
    if v is None:
        return "N/A"
    if v >= 1024:
        return f"{v / 1024:.1f}G"
    return f"{v:.0f}M"


def duration(s: float | None) -> str:
    if s is None:
        return "N/A"
    s = int(s)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


# The calibration runs' phase names (the demo's and any recording made with them), in words.
_PHASES = {
    "start": "start of the recording",
    "idle": "GPUs idle",
    "between": "between jobs",
    "train": "a job trains",
    "comm_heavy": "a job that mostly communicates",
    "p2p": "GPU-to-GPU copies",
    "serve_idle": "a server waits for requests",
    "stall_in_loop": "a rank stops entering all_reduce",
    "rank_dies": "a rank dies",
}


def phase_words(phase: str) -> str:
    """A recording's phase tag as a person would say it: `stall_in_loop_dumping` is "a rank
    stops entering all_reduce (stacks dumped)"; an unknown tag has its underscores spaced."""
    base, suffix = phase, ""
    for tail, words in (("_init", "{} (starting)"), ("_dumping", "{} (stacks dumped)")):
        if phase.endswith(tail):
            base, suffix = phase[: -len(tail)], words
    said = _PHASES.get(base, base.replace("_", " "))
    return suffix.format(said) if suffix else said
