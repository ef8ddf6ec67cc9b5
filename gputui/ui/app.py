"""The gputui dashboard: status line, verdict banner, GPUs, process table, key bar.

Data flows one way: the Sampler thread pulls a Snapshot, runs the hang detector (and the
evidence watcher) on it and keeps the per-GPU history, all off the UI thread, then posts
SnapshotReady; the UI only draws. Every widget is line-based (gputui/ui/widgets/strips.py) and
repaints only the lines that changed. A 1 s timer looks at the age of the newest sample and
redraws the status line only when the data turns stale (or stays stale), so a healthy
dashboard draws one frame per sample.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from gputui.collect.model import Snapshot
from gputui.collect.sampler import Sampler
from gputui.collect.source import Source
from gputui.ui.actions.blamed_key import BlamedProbeKey
from gputui.ui.actions.process import RECENT, ProcessActions
from gputui.ui.actions.story import DemoStory, StoryBar, StoryKeys
from gputui.ui.actions.table import TableActions
from gputui.ui.actions.way_out import WayOut
from gputui.ui.keys import BINDINGS as KEYS
from gputui.ui.keys import PALETTE, shown
from gputui.ui.messages import EvidenceArrived, SamplerFailed, SnapshotReady, SourceEnded
from gputui.ui.widgets.banner import VerdictBanner, banner_height
from gputui.ui.widgets.bars import KeyBar, StatusLine
from gputui.ui.widgets.gpu_board import HISTORY, GpuBoard, GpuHistory
from gputui.ui.widgets.marks import gpu_tags, row_flags
from gputui.ui.widgets.no_gpu import NoGpuNote
from gputui.ui.widgets.notices import OneMessage
from gputui.ui.widgets.palette import Palette
from gputui.ui.widgets.process_table import ProcessTable
from gputui.ui.widgets.strips import LineView
from gputui.watch.run import WatchRun
from gputui.watch.settings import WatchSettings


def _terminal_alive() -> bool:
    stdin = sys.__stdin__
    try:
        return stdin is not None and os.isatty(stdin.fileno())
    except (OSError, ValueError):
        return False


class GputuiApp(
    StoryKeys, OneMessage, ProcessActions, TableActions, WayOut, BlamedProbeKey, App[None]
):
    TITLE = "gputui"
    CSS = "Screen { layout: vertical; }"
    BINDINGS = KEYS

    def __init__(
        self,
        source: Source,
        settings: WatchSettings | None = None,
        probe_args: dict[str, Any] | None = None,
        bundle_dir: Path | None = None,
        watch_terminal: bool = False,
        first: Snapshot | None = None,
        story: DemoStory | None = None,
        theme: str | None = None,
        **loose: Any,  # stall_after=, auto_dump=... : the settings' fields, for tests
    ) -> None:
        super().__init__()
        if theme is not None:  # one of theme_names(): the caller checked it (commands/app.py)
            self.theme = theme
        self.source = source
        self.story = story  # the guided demo (`gputui --demo`), holding at each finding
        # Whether the Watcher may gather follows the source: a replay's evidence is recorded.
        self.settings = WatchSettings.of(settings, **loose).live_if(source.kind != "replay")
        self.bundle_dir = bundle_dir
        self.probe_args = probe_args or {}
        self.recent_snapshots: deque[Snapshot] = deque(maxlen=RECENT)
        # The hang detector, plus the evidence it gathers at a stall (stack dumps of every
        # rank; in a replay, the dumps the recording carries): run on the sampler thread.
        self.watch_run = WatchRun(self.settings)  # stepped on the sampler thread
        self.watcher = self.watch_run.watcher
        self.watcher.on_evidence = lambda: self.post_message(EvidenceArrived())
        self.snapshot: Snapshot | None = None
        self.verdict: Any | None = None
        self.received_at: float | None = None  # monotonic time the newest snapshot arrived
        self.started_at = time.monotonic()
        self.paused_until = float("-inf")  # the last time the sampler was seen paused
        self.ended = False
        self.ended_event = asyncio.Event()  # set when a replay has run out (tests wait on it)
        self.first_snapshot = asyncio.Event()
        self.sampler = Sampler(
            source,
            self._from_sampler,
            on_end=lambda: self.post_message(SourceEnded()),
            on_error=lambda e: self.post_message(SamplerFailed(str(e))),
        )
        # util, memory util, power fraction per GPU index; owned by the sampler thread
        self._hist: dict[int, tuple[deque[float | None], ...]] = {}
        self.history: dict[int, GpuHistory] = {}
        self._stale_shown: int | None = None
        self.sample_error: str | None = None  # the latest sampling failure, until a sample
        self.watch_terminal = watch_terminal  # exit when the terminal goes away
        self._first = first  # a sample taken while Textual was importing (commands/app.py)
        self._host_sorted = False  # sorted by CPU% once, on the first sample without GPUs

    # -- sampler thread side: never touches widgets
    def _from_sampler(self, snap: Snapshot) -> None:
        self.post_message(self._prepare(snap))

    def _prepare(self, snap: Snapshot) -> SnapshotReady:
        """The detector's verdict and the per-GPU history for one sample (sampler thread)."""
        verdict = self.watch_run.step(snap)
        if snap.gpus:  # every sample, for `b` (a message can replace an undrawn one)
            self.recent_snapshots.append(snap)
        elif not self.recent_snapshots or not self.recent_snapshots[-1].gpus:
            # A machine without GPUs: its newest host sample alone, so that `b` bundles it
            # too (GPU samples already kept are never replaced by a sample that lacks them).
            if self.recent_snapshots:
                self.recent_snapshots.pop()
            self.recent_snapshots.append(snap)
        if self.story is not None and self.story.check(verdict, snap.phase, snap.t):
            self.sampler.pause(True)  # before the next sample: the finding stays on screen
        for g in snap.gpus:
            h = self._hist.get(g.index)
            if h is None:
                h = (deque(maxlen=HISTORY), deque(maxlen=HISTORY), deque(maxlen=HISTORY))
                self._hist[g.index] = h
            h[0].append(g.util)
            h[1].append(g.mem_util)
            h[2].append(g.power_frac)
        history = {
            i: GpuHistory(tuple(u), tuple(m), tuple(p)) for i, (u, m, p) in self._hist.items()
        }
        return SnapshotReady(snap, verdict, history)

    # -- UI
    def compose(self) -> ComposeResult:
        # Kept as attributes: a DOM query per widget per sample is work for nothing, and
        # these widgets live as long as the app.
        self.status = StatusLine(id="status")
        self.story_bar = StoryBar(self.story)
        self.banner = VerdictBanner(id="banner")
        self.board = GpuBoard(id="gpus")
        self.no_gpu = NoGpuNote()
        self.table = ProcessTable(id="procs")
        self.keybar = KeyBar(id="keys")
        yield from (
            Palette(),  # the colours of the current theme (gputui.ui.widgets.palette)
            self.status,
            self.story_bar,
            self.banner,
            self.board,
            self.no_gpu,
            self.table,
            self.keybar,
        )

    def on_mount(self) -> None:
        self.table.focus()
        if self._first is not None:
            # Shown in the very first frame: the widgets build their lines when they are
            # first laid out, with this data already in them. The detector's verdict on it
            # (and the evidence watcher's start) follows from the sampler thread once this
            # frame is painted: the UI thread never runs the detector.
            first, self._first = self._first, None
            self._show_first(first)
            self.call_after_refresh(self.sampler.start, self.source.next_delay(), first)
        else:
            self.sampler.start()
        self.set_interval(1.0, self._check_stale)
        self._refresh_status()
        self._show_notes()

    def _show_notes(self) -> None:
        """What the recording's reader skipped (records of the wrong shape), each once: at
        the start, and at the end of a replay read while it played."""
        from gputui.textsafe import clean

        said = self.__dict__.setdefault("_notes_said", set())
        for note in getattr(self.source, "notes", ()):
            if note not in said:
                said.add(note)
                self.notify(clean(note), severity="warning", timeout=10)

    def _show_first(self, snap: Snapshot) -> None:
        """The first sample as it is, GPUs and processes, before any verdict."""
        self.snapshot, self.received_at = snap, time.monotonic()
        self.history = {
            g.index: GpuHistory((g.util,), (g.mem_util,), (g.power_frac,)) for g in snap.gpus
        }
        self._render_snapshot()

    def on_unmount(self) -> None:
        self.sampler.stop()
        self.watch_run.close()

    def on_snapshot_ready(self, msg: SnapshotReady) -> None:
        was_alarm = self.verdict is not None and self.verdict.alarm
        self.sample_error = None
        self.snapshot, self.verdict, self.history = msg.snapshot, msg.verdict, msg.history
        self.received_at = time.monotonic()
        self._render_snapshot()
        if msg.verdict is not None and msg.verdict.alarm and not was_alarm:
            # The alarm just went up: select the suspect's row so it is on screen and `p`
            # dumps it, with no key pressed.
            self._select_suspect(quiet=True)
        self.first_snapshot.set()

    def on_evidence_arrived(self, _: EvidenceArrived) -> None:
        """Stacks (or other evidence) came in between samples: show them now."""
        latest = self.watcher.latest()
        if latest is not None and self.snapshot is not None:
            self.verdict = latest
            self._render_snapshot()

    def on_source_ended(self, _: SourceEnded) -> None:
        self.ended = True
        self._show_notes()
        if self.story is not None:
            if not self.story.done:
                self.story.finish()  # the demo ends on its summary, not on "replay ended"
            self.story_bar.redraw()  # its last line: the recording has ended
        self._refresh_status()
        self.ended_event.set()

    def on_sampler_failed(self, msg: SamplerFailed) -> None:
        """A failed sample: said once as a notice, and kept in the status line while it
        lasts (a hung NVML fails every tick; a notice per tick would pile up)."""
        if msg.error != self.sample_error:
            self.notify(f"sampling failed: {msg.error}", severity="error", timeout=8)
        self.sample_error = msg.error
        self._refresh_status()

    def on_resize(self, event: events.Resize) -> None:
        self.board.redraw()

    def _render_snapshot(self) -> None:
        snap = self.snapshot
        assert snap is not None
        self.banner.show(self.verdict, snap.t)
        board = self.board
        board.reserved = (
            2 + banner_height(self.verdict, self.size.width or 80) + self.story_bar.line_count
        )
        if self.story is not None:
            self.story_bar.redraw()
        tags = gpu_tags(self.verdict, snap)
        board.show(snap.gpus, self.history, tags, self._is_stale(), self.watcher.marks)
        note = self.no_gpu
        error = "" if snap.gpus else (snap.gpu_error or "this node reports no GPUs")
        if error != note.error:
            note.error = error
            note.redraw()
        if error and not self._host_sorted and snap.source == "host":
            # No GPUs: the busiest host processes first, as `gputui snapshot` lists them
            # (the table's default, by GPU then pid, put idle kernel threads on top).
            self._host_sorted = True
            if self.table.sort_by == "gpu":
                self.table.sort("cpu", reverse=False)
        self.table.apply(snap.processes, snap.jobs, snap.t, row_flags(self.verdict, snap))
        self._offer_keys()
        self._offer_blamed()
        self._refresh_status()

    def restyle(self) -> None:
        """The theme changed (gputui.ui.widgets.palette): every line is built again in its
        colours."""
        for screen in self.screen_stack:
            for w in screen.query(LineView):
                w.redraw()
        self.table.redraw()

    # -- status line and staleness
    def _stale_after(self) -> float:
        return 3 * self.source.next_delay() + 2

    def _age(self) -> float:
        """Seconds without a sample, not counting a pause (no sample is asked for then)."""
        since = self.received_at if self.received_at is not None else self.started_at
        return time.monotonic() - max(since, self.paused_until)

    def _is_stale(self) -> bool:
        """Samples are late: never while paused (a paused dashboard said "STALE: NVML not
        answering"), nor in the first intervals after it resumes."""
        if self.sampler.paused:
            self.paused_until = time.monotonic()
            return False
        return self.source.kind != "replay" and self._age() > self._stale_after()

    def _check_stale(self) -> None:
        if self.watch_terminal and not _terminal_alive():
            # The terminal hung up (ssh or tmux gone) and SIGHUP did not end us: nothing
            # can be drawn or read any more, and nothing needs restoring.
            self.sampler.stop()
            os._exit(129)
        stale = self._is_stale()
        shown = int(self._age()) if stale else None
        if shown != self._stale_shown:
            self._stale_shown = shown
            self._refresh_status()
            if self.snapshot is not None:
                board = self.board
                if board.stale != stale:
                    board.stale = stale
                    board.redraw()

    def _refresh_status(self) -> None:
        snap = self.snapshot
        src = getattr(self.source, "description", self.source.kind)
        # A replay names the recorded node as `check` and the exporter do.
        host = (snap.hostname if snap and snap.hostname else "") or getattr(self.source, "node", "")
        right = ""
        stale = self._is_stale()
        shorter: tuple[str, ...] = ()
        if snap is None:
            left = f"gputui · {src} · waiting for the first sample…"
        else:
            when = time.strftime("%H:%M:%S", time.localtime(snap.t))
            phase = snap.phase if self.source.kind == "replay" else None
            if phase:  # the recording's tag, in words (gputui.ui.widgets.format.phase_words)
                from gputui.ui.widgets.format import phase_words

                phase = phase_words(phase)
            parts = ["gputui", host, src, f"sample {when}", phase and f"recorded: {phase}"]
            left = " · ".join(p for p in parts if p)
            # Narrower: the app's name, then the clock time, then the host go first.
            shorter = tuple(
                " · ".join(p for p in cut if p)
                for cut in (
                    [host, src, f"sample {when}", phase and f"recorded: {phase}"],
                    [host, src, phase],
                    [src, phase],
                    [src] if not phase else ["replay", phase],
                )
            )
        if stale:
            what = "no sample yet" if snap is None else "no sample"
            why = self.sample_error or "NVML not answering?"
            right = f"STALE: {what} for {self._age():.0f} s ({why})"
        elif self.story is not None and self.story.holding is not None:
            right = ""  # the story bar names the key that goes on
        elif self.story is not None and self.story.done and (self.ended or self.sampler.paused):
            right = f"demo done ({shown('quit')} quits)"
        elif self.ended:
            right = f"replay ended ({shown('quit')} quits)"
        elif self.sampler.paused:
            right = f"PAUSED ({shown('pause')} resumes)"
        self.status.show(left, right, stale, shorter)

    # -- commands, help, palette
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """gputui's own actions first in the command palette (ctrl+p)."""
        for k in PALETTE:
            yield SystemCommand(k.does, f"key: {k.shown}", lambda a=k.action: self.run_action(a))
        yield from super().get_system_commands(screen)

    def action_help(self) -> None:
        from gputui.ui.screens.help import HelpScreen

        keys = [b for b in self.BINDINGS if isinstance(b, Binding)]
        self.push_screen(HelpScreen(keys, demo=self.story is not None))

    def action_clocks(self) -> None:
        from gputui.ui.screens.clocks import ClocksScreen

        self.push_screen(ClocksScreen())

    def action_details(self) -> None:
        from gputui.ui.screens.details import DetailsScreen

        self.push_screen(DetailsScreen(self.verdict, self.snapshot, self.source.kind == "replay"))
