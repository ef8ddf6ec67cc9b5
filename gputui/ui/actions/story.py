"""The guided demo: `gputui --demo` holds at each finding until the user goes on.

Played at its own pace, the bundled recording showed its point for a few seconds: the stall
was on screen for about 24 s and the dead rank for under one, and the replay ended on "OK".
Here the story is told in chapters. Each chapter is a part of the recording (its `phase`
field, the ground truth of the calibration run) and the verdict that must be on screen for
it: the replay pauses at the first sample where the verdict says so, the story bar names the
chapter and the key that goes on, and every other key keeps working. Going on skips the rest
of that hang to a few seconds before the next chapter's job starts; after the last one, the
bar turns into a summary of what was found and what to try next.

The hold is decided on the sampler thread, in the same call that hands the sample on, so no
later sample can slip past the moment of the finding.

While a chapter plays toward its finding, a second line says how far off it is, truthfully:
before the hang, when it starts on the recording ("one rank stops entering all_reduce in 3
s", read from the samples at the start); after it, that the banner counts what the detector
sees (the seconds the peer has spun, against the 10 s that make a stall). The first stop came
26 s in with nothing but "OK no hang" to read; the demo now starts 2 s before the first job's
processes appear, and its first stop comes about 15 s in.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.strip import Strip

from gputui.ui.actions.table import TableActions
from gputui.ui.keys import offer_line, shown
from gputui.ui.widgets.strips import LineView, fit, text_line

if TYPE_CHECKING:
    from gputui.ui.protocols import AppLike

STORY_STYLE = "@story"
HINT_STYLE = "@story-hint"
GO_ON_KEY = shown("pause")
LEAD_S = 2.0  # going on lands this long before the next chapter's job shows its first process


@dataclass(frozen=True)
class Chapter:
    """One finding of the demo: where it happens in the recording and what it shows."""

    label: str  # a word for the summary
    coming: str  # shown while the chapter's job runs, before its finding
    title: str  # shown while the replay holds at the finding
    phases: tuple[str, ...]  # the recording's phases in which the finding appears
    start_phase: str  # going on from the chapter before lands a few seconds before this
    culprit: bool  # hold only once the suspect's stack (its culprit line) is known
    event: str = ""  # what happens on the recording, for "... in 3 s"
    after: str = ""  # once it has happened, until the finding

    def holds_at(self, verdict: Any, phase: str | None) -> bool:
        if verdict is None or not verdict.alarm or phase not in self.phases:
            return False
        return bool(verdict.culprit_frame) if self.culprit else True


DEMO_CHAPTERS = (
    Chapter(
        label="stuck",
        coming="a 2-rank job trains; soon one rank stops entering all_reduce",
        title="a rank stopped entering all_reduce; its peer waits for it",
        phases=("stall_in_loop", "stall_in_loop_dumping"),
        start_phase="stall_in_loop_init",
        culprit=True,
        event="the rank stops",
        after="rank 1 stopped entering all_reduce: the banner counts rank 0's wait",
    ),
    Chapter(
        label="died",
        coming="a new 2-rank job trains; soon one of its ranks dies",
        title="a rank died; its peer waits in all_reduce for a rank that is gone",
        phases=("rank_dies", "rank_dies_dumping"),
        start_phase="rank_dies_init",
        culprit=False,
        event="the rank dies",
        after="rank 1 died (its row is gone): the banner counts rank 0's wait",
    ),
)

_Q = f"{shown('quit')}: quit · see docs/demo.md"
END = f"{GO_ON_KEY}: play the rest of the recording · {_Q}"
# What the summary's last line offers, by what the replay does now: "space: play the rest"
# only while it is paused at the summary (said while it played on, it was untrue).
ENDS = {
    "paused": END,
    "playing": f"the rest of the recording plays · {GO_ON_KEY}: pause · {_Q}",
    "ended": f"the recording has ended · {_Q}",
}
TRY_NEXT = (
    "try: gputui check --demo · gputui bundle --demo · gputui snapshot --demo",
    "on a GPU node: gputui · gputui check · gputui record run.jsonl.gz",
)


class DemoStory:
    """Where the demo's story stands; `check` runs on the sampler thread, the rest on the UI.

    `snaps`: the recording, to say when each chapter's hang starts (its countdown)."""

    def __init__(
        self, chapters: tuple[Chapter, ...] = DEMO_CHAPTERS, snaps: list[Any] | None = None
    ) -> None:
        self.chapters = chapters
        self.next = 0  # index of the chapter still to come
        self.holding: int | None = None  # index of the chapter the replay holds at
        self.done = False  # the summary is shown
        self.found: list[str] = []  # one line per finding held at, for the summary
        self.gone = False  # the finding held at is a rank that is gone (it has no stack)
        self.events = event_times(snaps or [], chapters)  # chapter -> when its hang starts
        self.now: float | None = None  # the time and phase of the sample on screen
        self.phase: str | None = None
        self._lock = threading.Lock()

    def check(self, verdict: Any, phase: str | None, t: float | None = None) -> bool:
        """True when the replay must hold at this sample (sampler thread)."""
        with self._lock:
            self.now, self.phase = t, phase
            if self.holding is not None or self.done:
                return False
            for i in range(self.next, len(self.chapters)):
                if self.chapters[i].holds_at(verdict, phase):
                    self.holding, self.next = i, i + 1
                    first = verdict.findings[0] if verdict.findings else verdict.reason
                    self.found.append(f"{i + 1}. {self.chapters[i].label}: {first}")
                    self.gone = bool(verdict.suspects) and set(verdict.suspects) <= set(
                        verdict.vanished
                    )
                    return True
            return False

    def _playing(self) -> int:
        """The chapter still to come whose part of the recording is playing (one started
        with --start past a finding plays the next), else the next one."""
        n = len(self.chapters)
        for i in range(self.next, n):
            if self.phase in (self.chapters[i].start_phase, *self.chapters[i].phases):
                return i
        return min(self.next, n - 1)

    def _progress(self, i: int) -> str | None:
        """How far off chapter i's finding is: the recording's countdown to its hang; after
        it, where the detector's count is (the banner)."""
        c = self.chapters[i]
        at, now = self.events.get(i), self.now
        if at is None or now is None or not c.event:
            return None
        if now >= at:
            return c.after
        return f"{c.event} in {max(1, round(at - now))} s"  # never "in 0 s" before it

    def go_on(self) -> str | None:
        """Leave the chapter held at; the phase to skip to (None: no skip, the story ends
        when no chapter is left)."""
        with self._lock:
            if self.holding is None:
                return None
            self.holding = None
            if self.next >= len(self.chapters):
                self.done = True
                return None
            return self.chapters[self.next].start_phase

    def finish(self) -> None:
        """The recording ran out: show the summary."""
        with self._lock:
            self.holding, self.done = None, True

    def lines(self, replay: str = "paused") -> list[tuple[str, str]]:
        """(text, style) for the story bar; `replay`: "paused", "playing" or "ended" (after
        the summary, space plays the rest of the recording)."""
        n = len(self.chapters)
        if self.done:
            told = f"demo done: {len(self.found)} of {n} findings shown"
            return [
                (told, STORY_STYLE),
                *((f"  {f}", HINT_STYLE) for f in self.found),
                *((f"  {t}", HINT_STYLE) for t in TRY_NEXT),
                (f"  {ENDS.get(replay, END)}", HINT_STYLE),
            ]
        if self.holding is not None:
            c = self.chapters[self.holding]
            last = self.holding == n - 1
            go = "go on to the summary" if last else "go on to the next hang"
            keys = (
                offer_line(("details", "why it is gone"), ("dump_all", "its peer's stack"))
                if self.gone
                else offer_line(
                    ("details", "why"), ("dump_all", "all stacks"), ("py_spy", "its stack")
                )
            )
            return [
                (f"demo {self.holding + 1}/{n}: {c.title}", STORY_STYLE),
                (f"  {GO_ON_KEY}: {go} · {keys}", HINT_STYLE),
            ]
        with self._lock:
            i = self._playing()
            progress = self._progress(i)
        head = (f"demo {i + 1}/{n}: {self.chapters[i].coming}", STORY_STYLE)
        return [head, *([(f"  {progress}", HINT_STYLE)] if progress else [])]


def event_times(snaps: list[Any], chapters: tuple[Chapter, ...]) -> dict[int, float]:
    """When each chapter's hang starts on the recording: the first sample of its job's
    phases where a GPU spins or one of the job's processes has gone."""
    from gputui.diagnose.hang.classify import GpuState, classify_all

    out: dict[int, float] = {}
    for i, c in enumerate(chapters):
        seen: set[int] = set()
        for s in snaps:
            if s.phase not in (c.start_phase, *c.phases):
                continue
            pids = {p.pid for p in s.processes}
            spins = GpuState.SPINNING in classify_all(s.gpus)
            if spins or (seen - pids and pids):
                out[i] = s.t
                break
            seen |= pids
    return out


class StoryBar(LineView):
    """The demo's story: the chapter, the key that goes on, and at the end the summary."""

    DEFAULT_CSS = "StoryBar { height: auto; }"

    def __init__(self, story: DemoStory | None) -> None:
        super().__init__(id="story")
        self.story = story

    def build(self, width: int) -> list[Strip]:
        if self.story is None:
            return []
        lines = self.story.lines(self._replay())
        return [text_line(fit(f" {text}", width), width, spec) for text, spec in lines]

    def _replay(self) -> str:
        """What the replay does now: "paused", "playing" or "ended"."""
        try:
            app = self.app
        except Exception:  # not mounted: no app to ask
            return "paused"
        if getattr(app, "ended", False):
            return "ended"
        return "paused" if getattr(getattr(app, "sampler", None), "paused", True) else "playing"

    @property
    def line_count(self) -> int:
        return 0 if self.story is None else len(self.story.lines())


class StoryKeys:
    """Mixin for GputuiApp: space goes on from the finding the demo holds at."""

    def action_pause(self: AppLike) -> None:
        """space: in the guided demo, go on from the finding it holds at; else pause."""
        story = self.story
        if story is None or story.holding is None:
            TableActions.action_pause(self)  # the next in GputuiApp's bases that has it
            if story is not None and story.done:
                self.story_bar.redraw()  # "space: play the rest" or "plays · space: pause"
            return
        phase = story.go_on()
        if phase is not None:
            seek_phase(self.source, phase)
        if not story.done:
            self.sampler.pause(False)
        self.story_bar.redraw()
        self._render_snapshot()  # the board's room changes with the story bar's height
        self._refresh_status()


def seek_phase(source: Any, phase: str, lead: float = LEAD_S) -> bool:
    """Move a paused replay to `lead` seconds before the first process of `phase`'s job, if
    that is ahead of where it is; False when there is nothing to skip."""
    from gputui.collect.source import job_start

    source = getattr(source, "inner", source)  # a FilteredSource (--gpus) plays its inner one
    snaps = getattr(source, "snaps", None)
    pos = getattr(source, "pos", None)
    if snaps is None or pos is None:
        return False
    first = next((i for i, s in enumerate(snaps) if s.phase == phase), None)
    if first is None or first <= pos:
        return False
    t = job_start(snaps, phase) - lead
    source.pos = max(pos, next(i for i, s in enumerate(snaps) if s.t >= t))
    return True
