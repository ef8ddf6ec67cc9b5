"""What `gputui check` says in text: one line per verdict change, and a straggler's profile.

Why apart from the command: the command decides when a line is due (the verdict, its
evidence or the job's ranks changed); these say what the line is, and are what a test of
the wording imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputui.diagnose.verdict import Verdict

__all__ = ["profile_lines", "said", "verdict_line"]


def verdict_line(v: Verdict, t0: float) -> str:
    return f"+{v.t - t0:7.1f} s  {said(v)}"


def said(v: Verdict) -> str:
    """A verdict's text line without its time: a line is printed when this changes (a new
    job key or ranks change the JSON line, not what the text says)."""
    head = f"{v.state.upper():8s}"
    if not v.alarm:
        return f"{head} {v.reason}"
    pids = ", ".join(map(str, v.suspect_pids))
    if v.suspects:
        sus = f"suspect GPU {', '.join(map(str, v.suspects))}" + (f" (pid {pids})" if pids else "")
    else:
        sus = f"suspect pid {pids}" if pids else "suspect GPU none named"
    spin = ", ".join(map(str, v.spinning))
    where = (
        f"spinning GPU {spin} · {sus}" if v.spinning else "no GPU spins (ranks wait on the host)"
    )
    text = f"{head} {where}\n{'':19s}{v.reason}"
    return text + "".join(f"\n{'':19s}- {f}" for f in v.findings if f != v.reason)


def profile_lines(prof: dict[str, object] | None) -> str:
    """The straggler's top functions under its verdict line (text output)."""
    if prof is None:
        return ""
    head = f"py-spy of the straggler (pid {prof.get('pid')}): {prof.get('outcome')}"
    if prof.get("outcome") != "done":
        return f"\n{'':19s}{head}: {prof.get('message')}"
    where = prof.get("where")
    head += f": {where}" if isinstance(where, str) else ""
    rows = [
        f"{e['share']:5.0%}  {e['frame']}"
        + (f"  ({e.get('idle', 0) / e['share']:.0%} idle)" if e.get("idle") else "")
        for e in prof.get("top_self") or []  # type: ignore[attr-defined]
    ]
    return f"\n{'':19s}{head}" + "".join(f"\n{'':21s}{r}" for r in rows)
