"""Full-text screens on top of the dashboard: the verdict's details (`d`) and a process's
environment (`e`). Both are read-only, scroll, and close on escape or q."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import Any

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from gputui.ui.keys import screen_bindings, shown
from gputui.ui.widgets.palette import role
from gputui.ui.widgets.safe_text import Static, Text

# Each finding's strength (gputui.diagnose.ranking.Strength) as the label a reader needs:
# what kind of evidence it is, not the enum's name.
_KIND = {
    "HARDWARE": "GPU hardware",
    "RANK_GONE": "rank gone",
    "MISMATCH": "collectives differ",
    "CULPRIT_LINE": "stuck at a line",
    "RAS_BEHIND": "NCCL RAS",
    "NVML": "GPU readings",
    "CONTEXT": "also",
}


class TextScreen(ModalScreen[None]):
    BINDINGS = screen_bindings("text")
    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > VerticalScroll { width: 100%; max-width: 110; height: auto;
        max-height: 100%; border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, title: str, body: Text | Callable[[int], Text]) -> None:
        super().__init__()
        self.title_text, self.body = title, body

    def compose(self) -> ComposeResult:
        body = self.body
        if callable(body):  # laid out for the room it has: bullets wrap under their text
            body = body(max(20, min(self.app.size.width, 110) - 6))
        with VerticalScroll():
            yield Static(Text(f"{self.title_text}  (esc closes)", style="bold"))
            yield Static(body)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


def _bullet(t: Text, text: str, width: int | None, label: str = "") -> None:
    """`  · label: text`, its wrapped lines indented under the text, not at the left edge."""
    head = f"  · {label}: " if label else "  · "
    if width is None:
        t.append(head, style="dim" if label else None).append(f"{text}\n")
        return
    lines = textwrap.wrap(head + text, width, subsequent_indent="    ", break_on_hyphens=False) or [
        head
    ]
    first = lines[0]
    t.append(first[: len(head)], style="dim" if label else None)
    t.append(first[len(head) :] + "\n")
    for line in lines[1:]:
        t.append(line + "\n")


# In a replay the next steps name commands for the live node (`gputui dump 815`, n, g, the
# dashboard's p on a live row): they cannot reach a recorded process, which ran on the
# recorded node, so they give way to what a replay can do.
_LIVE_STEP = re.compile(r"`gputui dump\b|\(j\) and press p|n adds native frames")

REPLAY_STEP = (
    "This is a replay: its processes ran on the recorded node, so nothing here can attach to "
    f"them. What the recording holds is here: {shown('py_spy')} shows the selected rank's "
    f"recorded stack ({shown('jump_suspect')} selects the suspect), {shown('dump_all')} every "
    f"rank's, {shown('details')} this; {shown('bundle')} writes a bundle of this moment."
)


def steps_for(v: Any, replay: bool) -> tuple[str, ...]:
    """The verdict's next steps as the details screen lists them: in a replay, those that
    need the live processes give way to what the replay offers."""
    steps = tuple(getattr(v, "next_steps", ()) or ())
    if not replay or not steps:
        return steps
    return (REPLAY_STEP, *(s for s in steps if not _LIVE_STEP.search(s)))


def verdict_text(
    v: Any | None, snap: Any | None, replay: bool = False, width: int | None = None
) -> Text:
    """Everything the banner leaves out: the full reason, every finding, the next steps (in
    a replay, those a replay can follow: steps_for)."""
    from gputui.diagnose.hang.threads import entry_lines

    t = Text()
    if v is None:
        return t.append("No sample yet.")
    t.append(f"{v.state.upper()}", style="bold")
    if v.alarm and v.since is not None and snap is not None:
        t.append(f" for {snap.t - v.since:.0f} s")
    t.append(f"\n\n{v.reason}\n")
    if v.culprit_frame:
        t.append("\nCulprit frame: ", style="bold").append(v.culprit_frame, style=role("@alert"))
        t.append("\n")
    ranked = getattr(v, "ranked", ()) or ()
    if ranked:  # strongest first, each with its strength (gputui.diagnose.ranking)
        t.append("\nWhat the evidence says, strongest first:\n", style="bold")
        for f in ranked:
            _bullet(t, f.text, width, _KIND.get(f.strength.name, "also"))
    elif v.findings:
        t.append("\nWhat the evidence says:\n", style="bold")
        for f in v.findings:
            _bullet(t, str(f), width)
    for entry in v.stacks:
        rank = entry.get("rank")
        who = f"rank {rank}" if rank is not None else f"pid {entry.get('pid')}"
        t.append(f"\n{who} (pid {entry.get('pid')}, GPU {entry.get('gpu')}, ")
        t.append(f"{entry.get('role')}): {entry.get('outcome')}\n", style="bold")
        if entry.get("error"):
            t.append(f"    {entry['error']}\n", style="italic")
        for line in entry_lines(entry):  # every thread (the GIL holder first), every child
            t.append(f"{line}\n")
    steps = steps_for(v, replay)
    if steps:
        t.append("\nNext steps:\n", style="bold")
        for s in steps:
            _bullet(t, s, width)
    return t


def DetailsScreen(v: Any | None, snap: Any | None, replay: bool = False) -> TextScreen:  # noqa: N802
    return TextScreen(
        "hang detector: verdict details", lambda width: verdict_text(v, snap, replay, width)
    )
