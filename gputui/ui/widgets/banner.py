"""The verdict banner: one line when all is well, three or more at a stall, details behind `d`.

At a stall the banner answers first (who is the suspect, where it is stuck), then says what
to press. The answer is the verdict's headline, the strongest evidence (ranked once, in
gputui.diagnose.ranking): it wraps onto as many lines as it needs (up to MAX_ANSWER_LINES)
rather than being cut, because "rank 0 in broadcast (train.py:53), rank 1 in all_reduce
(train.py:57)" cut after "rank 1" says nothing; the process table's empty rows give up
the room first (it takes what is left). Every finding and the next steps are on the details
screen (`d`).
"""

from __future__ import annotations

import re
from typing import Any

from textual.strip import Strip

from gputui.diagnose.states import State
from gputui.textsafe import clean
from gputui.ui.keys import offer_line
from gputui.ui.widgets.strips import Line, LineView, fit

MAX_ANSWER_LINES = 6  # 80 columns: ~470 characters of headline, still leaving the GPUs room
MAX_SLOW_LINES = 3  # a slow job is no alarm: its sentence takes less of the screen
SLOW_BADGE = " SLOW "
MAX_OK_LINES = 3  # a quiet verdict wraps too (never "Not F…"), but stays short
BUSY_BADGE = " BUSY "  # a busy job: its peers wait while the rank they wait for advances
NVML_LEVEL = 10  # gputui.diagnose.ranking.Strength.NVML (not imported: the UI starts fast)
MISMATCH_LEVEL = 40  # Strength.MISMATCH

OK_STYLE = "@ok"
SLOW_STYLE = "@slow"
BUSY_STYLE = "@busy"
STALLED_STYLE = "@stalled"
HUNG_STYLE = "@hung"
KEYS = offer_line(
    ("jump_suspect", "select suspect"),
    ("py_spy", "its stack"),
    ("dump_all", "all ranks"),
    ("details", "details"),
    ("bundle", "bundle"),
)
KEYS_GONE = offer_line(  # the suspect is gone: it has no stack
    ("details", "why it is gone"),
    ("py_spy", "what it left"),
    ("dump_all", "its peers' stacks"),
    ("bundle", "bundle"),
)


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
    elif _top(v) >= MISMATCH_LEVEL:  # no one suspect: the ranks disagree (said below)
        parts.append("the ranks disagree")
    else:
        parts.append("no suspect on this node")
    if v.spinning:
        parts.append(f"spinning GPU {', '.join(map(str, v.spinning))}")
    if getattr(v, "job", None):
        parts.append(f"job {v.job.split(' (')[0]}")
    return badge, "  " + " · ".join(parts)


def _top(v: Any) -> int:
    """The strength of the verdict's strongest finding (0 when there is none)."""
    ranked = getattr(v, "ranked", ()) or ()
    return int(getattr(ranked[0], "strength", 0)) if ranked else 0


def answer(v: Any) -> str:
    """The answer line: the headline when evidence beats the NVML picture (the reason is
    then the strongest finding's sentence), else the detector's why."""
    if _top(v) > NVML_LEVEL:
        return "▶ " + v.reason
    reason = v.reason
    for marker in ("; not spinning: ", "; every GPU", "; its peers"):
        i = reason.find(marker)
        if i >= 0:
            return "▶ " + reason[i + 2 :].rstrip(".")
    return "▶ " + reason


def wrap(text: str, width: int, limit: int = MAX_ANSWER_LINES) -> list[str]:
    """`text` in lines of at most `width` cells, broken at spaces, continuation lines
    indented by two; the last line ends in … when `limit` lines do not hold it all."""
    if width <= 4:
        return [fit(text, max(0, width))]
    lines: list[str] = []
    rest = text
    while rest and len(lines) < limit:
        room = width if not lines else width - 2
        if len(rest) <= room:
            lines.append(rest)
            rest = ""
            break
        cut = rest.rfind(" ", 0, room + 1)
        cut = cut if cut > room // 2 else room
        lines.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        lines[-1] = fit(lines[-1] + " " + rest, width if len(lines) == 1 else width - 2)
    return [ln if i == 0 else "  " + ln for i, ln in enumerate(lines)]


def quiet_reason(v: Any) -> str:
    """A verdict that raises nothing, as the banner says it: without the pointer to the demo
    that a node with no driver gets (the line under the banner says it, once)."""
    reason = str(v.reason)
    if "gputui --demo" in reason:
        from gputui.collect.nvml.reader import NO_DRIVER_HINT

        reason = reason.replace(f"; {NO_DRIVER_HINT}", "").replace(NO_DRIVER_HINT, "")
    return reason


def _quiet_lines(v: Any, width: int) -> list[str]:
    """The quiet verdict's lines after its badge: wrapped at spaces, as the alarm's answer."""
    badge = 6 if v.state == State.SLOW else 4  # " SLOW ", " OK "
    room = max(8, width - badge)
    return wrap(f"  {quiet_reason(v)}", room, MAX_OK_LINES)  # each line indented by two


def banner_height(v: Any | None, width: int = 80) -> int:
    """Lines the banner takes for this verdict at this width (known before it is drawn, so
    the GPU board can choose its form in the same pass)."""
    if v is None:
        return 0
    if v.state == State.SLOW:
        return len(_slow_lines(v, width))
    if v.state == State.BUSY:
        return len(_busy_lines(v, width))
    return 2 + len(wrap(answer(v), width)) if v.alarm else len(_quiet_lines(v, width))


def slow_headline(reason: str) -> str:
    """The first sentence of a slow verdict (who is the straggler, how much the others wait),
    with the job's key alone: why it is slow (power, clocks, host CPU) is behind `d`."""
    first = reason.split(". ", 1)[0].rstrip(".")
    first = re.sub(r"^job (\S+) \([^)]*\): ", r"job \1: ", first)
    return first + (f" · {offer_line(('details', 'why'))}" if first != reason.rstrip(".") else "")


def _slow_lines(v: Any, width: int) -> list[str]:
    """A slow job's sentence after its badge, wrapped as a stall's answer is (at 80 columns
    "slow: rank 2 (GPU 2) is the straggler; ranks 0, 1, 3 wait ..." does not fit one line)."""
    room = max(1, width - len(SLOW_BADGE))
    lines = wrap(f"  {clean(slow_headline(v.reason))}", room, MAX_SLOW_LINES)
    return [lines[0]] + [" " * len(SLOW_BADGE) + ln for ln in lines[1:]]


def _busy_lines(v: Any, width: int) -> list[str]:
    """A busy job's sentence after its badge: who advances, doing what, at what rate, and
    who waits ("rank 0 writes a checkpoint: save_checkpoint (train.py:88), 82 MB/s for 40 s
    · GPU 1 waits"). No alarm: it takes the room a slow job's sentence takes."""
    spin = ", ".join(map(str, getattr(v, "spinning", ()) or ()))
    waits = f" · GPU {spin} wait{'s' if ',' not in spin else ''}" if spin else ""
    room = max(1, width - len(BUSY_BADGE))
    lines = wrap(f"  {v.reason}{waits}", room, MAX_SLOW_LINES)
    return [lines[0]] + [" " * len(BUSY_BADGE) + ln for ln in lines[1:]]


def banner_lines(v: Any | None, now: float, width: int) -> list[Strip]:
    if v is None:
        return []
    if v.state == State.BUSY:  # progress, not a hang: a badge of its own, no alarm
        said, *more = _busy_lines(v, width)
        line = Line().add(BUSY_BADGE, BUSY_STYLE).add(fit(said, width - len(BUSY_BADGE)))
        return [line.strip(width), *(Line().add(fit(r, width)).strip(width) for r in more)]
    if v.state == State.SLOW:  # a straggler: not an alarm, but worth a badge of its own
        head, *rest = _slow_lines(v, width)
        top = Line().add(SLOW_BADGE, SLOW_STYLE).add(fit(head, width - len(SLOW_BADGE)))
        return [top.strip(width), *(Line().add(fit(r, width)).strip(width) for r in rest)]
    if not v.alarm:
        badge, style = " OK ", OK_STYLE
        # No GPU to watch: why, in the caution colour (the node's answer, not a quiet one).
        text = "dim" if getattr(v, "gpu_states", None) else "@caution"
        out = []
        for i, part in enumerate(_quiet_lines(v, width)):
            line = Line().add(badge if i == 0 else " " * len(badge), style if i == 0 else "")
            out.append(line.add(fit(part, max(0, width - len(badge))), text).strip(width))
        return out
    badge, text = headline(v, now)
    first = Line().add(badge, HUNG_STYLE if v.state == State.HUNG else STALLED_STYLE)
    first.add(fit(text, max(0, width - first.length)), "bold")
    style = "@alert" if v.findings else ""
    said = clean(answer(v))  # escaped before it is wrapped, so that the wrap counts them
    answers = [Line().add(fit(a, width), style).strip(width) for a in wrap(said, width)]
    gone = v.suspects and set(v.suspects) <= set(getattr(v, "vanished", ()) or ())
    third = Line().add(fit(KEYS_GONE if gone else KEYS, width), "italic")
    return [first.strip(width), *answers, third.strip(width)]


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
