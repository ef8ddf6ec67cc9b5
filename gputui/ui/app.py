"""The gputui dashboard: GPU panels, verdict banner and process table over one sampler.

Data flows one way: the Sampler thread pulls a Snapshot, runs the hang detector on it (still
off the UI thread) and posts SnapshotReady; the UI only renders. A 1 s timer re-renders the
age of the newest snapshot, so a sampler stuck inside NVML shows up as stale data.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.widgets import Footer, Input, Static

from gputui.collect.model import GpuSample, ProcessInfo, Snapshot
from gputui.collect.sampler import Sampler
from gputui.collect.source import Source
from gputui.ui.actions import RECENT, ProcessActions
from gputui.ui.banner import VerdictBanner
from gputui.ui.gpu_panel import HISTORY, GpuPanel
from gputui.ui.help_screen import HelpScreen
from gputui.ui.messages import SamplerFailed, SnapshotReady, SourceEnded
from gputui.ui.process_table import ProcessTable
from gputui.ui.text_view import TextView

PANEL_WIDTH = 46  # columns one GPU panel needs


def make_detector(stall_after: float, hang_after: float) -> Any | None:
    try:
        from gputui.diagnose.detector import Detector
    except ImportError:
        return None
    return Detector(stall_after=stall_after, hang_after=hang_after)


class GputuiApp(ProcessActions, App[None]):
    TITLE = "gputui"
    CSS = """
    Screen { layout: vertical; }
    #status { height: 1; background: $primary-background; padding: 0 1; }
    #status.-stale { background: $error; color: $text; text-style: bold; }
    #gpus { height: auto; grid-gutter: 0 1; }
    #nogpu { height: auto; padding: 0 1; border: round $warning; }
    #filter { display: none; }
    #filter.-show { display: block; }
    """
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", key_display="?", id="help"),
        Binding("j", "jump_suspect", "Suspect", id="jump_suspect"),
        Binding("p", "py_spy", "Py stack", id="py_spy"),
        Binding("n", "py_spy_native", "Native", id="py_spy_native"),
        Binding("g", "gdb", "gdb bt", id="gdb"),
        Binding("t", "strace", "strace", id="strace"),
        Binding("a", "dump_all", "All ranks", id="dump_all"),
        Binding("b", "bundle", "Bundle", id="bundle"),
        Binding("P", "probe", "Probe", key_display="P", id="probe"),
        Binding("slash", "filter", "Filter", key_display="/", id="filter"),
        Binding("s", "sort", "Sort", id="sort"),
        Binding("space", "pause", "Pause", id="pause", show=False),
    ]

    def __init__(
        self,
        source: Source,
        stall_after: float = 10.0,
        hang_after: float = 60.0,
        probe_args: dict[str, Any] | None = None,
        bundle_dir: Path | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.stall_after, self.hang_after = stall_after, hang_after
        self.bundle_dir = bundle_dir
        self.recent_snapshots: deque[Snapshot] = deque(maxlen=RECENT)
        self.detector = make_detector(stall_after, hang_after)
        self.probe_args = probe_args or {}
        self.snapshot: Snapshot | None = None
        self.verdict: Any | None = None
        self.received_at: float | None = None  # monotonic time the newest snapshot arrived
        self.ended = False
        self.ended_event = asyncio.Event()  # set when a replay has run out (tests wait on it)
        self.first_snapshot = asyncio.Event()
        self.sampler = Sampler(
            source,
            self._from_sampler,
            on_end=self._ended,
            on_error=lambda e: self.post_message(SamplerFailed(str(e))),
        )
        self._status_text = ""
        self._hist: dict[int, deque[GpuSample]] = {}  # owned by the sampler thread
        self.history: dict[int, tuple[GpuSample, ...]] = {}
        self._gpu_layout: tuple[int, ...] | None = None  # GPU indices the panels show

    # -- sampler thread side: never touches widgets
    def _from_sampler(self, snap: Snapshot) -> None:
        verdict = self.detector.update(snap) if self.detector is not None else None
        for g in snap.gpus:
            self._hist.setdefault(g.index, deque(maxlen=HISTORY)).append(g)
        history = {i: tuple(h) for i, h in self._hist.items()}
        self.post_message(SnapshotReady(snap, verdict, history))

    def _ended(self) -> None:
        self.post_message(SourceEnded())

    # -- UI
    def compose(self) -> ComposeResult:
        yield TextView(id="status")
        yield VerdictBanner(id="banner")
        yield Grid(id="gpus")
        yield ProcessTable(id="procs")
        yield Input(
            placeholder="filter processes (pid, user, state, command); enter to apply, "
            "escape to clear",
            id="filter",
        )
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(ProcessTable).focus()
        self.sampler.start()
        self.set_interval(1.0, self._refresh_status)
        self._refresh_status()

    def on_unmount(self) -> None:
        self.sampler.stop()

    def on_snapshot_ready(self, msg: SnapshotReady) -> None:
        self.snapshot, self.verdict, self.history = msg.snapshot, msg.verdict, msg.history
        self.recent_snapshots.append(msg.snapshot)
        self.received_at = time.monotonic()
        self._render_snapshot()
        self.first_snapshot.set()

    def on_source_ended(self, _: SourceEnded) -> None:
        self.ended = True
        self._refresh_status()
        self.ended_event.set()

    def on_sampler_failed(self, msg: SamplerFailed) -> None:
        self.notify(f"sampling failed: {msg.error}", severity="error", timeout=5)

    def on_resize(self) -> None:
        self._layout_panels()

    def _layout_panels(self) -> None:
        grid = self.query_one("#gpus", Grid)
        n = len(grid.children) or 1
        cols = max(1, min(n, self.size.width // PANEL_WIDTH or 1))
        grid.styles.grid_size_columns = cols

    def _gpu_tags(self) -> dict[int, tuple[str, str]]:
        v, snap = self.verdict, self.snapshot
        tags: dict[int, tuple[str, str]] = {}
        if v is None or snap is None:
            return tags
        for i, st in (getattr(v, "gpu_states", None) or {}).items():
            tags[i] = (str(getattr(st, "value", st)), "")
        if v.state != "ok":
            since = f" {snap.t - v.since:.0f}s" if v.since is not None else ""
            for i in v.spinning:
                tags[i] = ("spinning", since)
            for i in v.suspects:
                tags[i] = ("suspect", "")
        return tags

    def _render_snapshot(self) -> None:
        snap = self.snapshot
        assert snap is not None
        grid = self.query_one("#gpus", Grid)
        panels = {p.index: p for p in grid.query(GpuPanel)}
        layout = tuple(g.index for g in snap.gpus)
        if layout != self._gpu_layout:
            self._gpu_layout = layout
            grid.remove_children()
            panels = {g.index: GpuPanel(g.index) for g in snap.gpus}
            if panels:
                grid.mount_all(list(panels.values()))
            else:
                grid.mount(Static(self._no_gpu_text(snap), id="nogpu"))
            self.call_after_refresh(self._layout_panels)
        tags = self._gpu_tags()
        for g in snap.gpus:
            tag, detail = tags.get(g.index, (None, ""))
            panels[g.index].show(self.history.get(g.index) or (g,), tag, detail)
        self.query_one(VerdictBanner).show(self.verdict, snap.t)
        self.query_one(ProcessTable).apply(snap.processes, snap.jobs, snap.t, self._row_flags())
        self._refresh_status()

    def _no_gpu_text(self, snap: Snapshot) -> Text:
        t = Text()
        t.append("No GPUs: ", style="bold yellow")
        t.append(snap.gpu_error or "this node reports no GPUs")
        t.append("\nShowing the busiest host processes instead. ", style="dim")
        t.append(
            "Try `gputui --demo` to replay a real NCCL hang recorded on 2 x H200.", style="bold"
        )
        return t

    def _row_flags(self) -> dict[int, Text]:
        v = self.verdict
        if v is None or v.state == "ok":
            return {}
        flags: dict[int, Text] = {}
        snap = self.snapshot
        assert snap is not None
        for p in snap.processes:
            if set(p.gpus) & set(v.suspects) or p.pid in getattr(v, "suspect_pids", ()):
                flags[p.pid] = Text("SUSPECT", style="bold white on red")
            elif set(p.gpus) & set(v.spinning):
                flags[p.pid] = Text("waiting", style="black on yellow")
        return flags

    def _refresh_status(self) -> None:
        status = self.query_one("#status", TextView)
        snap = self.snapshot
        src = getattr(self.source, "description", self.source.kind)
        host = (snap.hostname if snap and snap.hostname else "") or ""
        stale = False
        if snap is None or self.received_at is None:
            text = f"gputui · {src} · waiting for the first sample…"
        else:
            age = time.monotonic() - self.received_at
            when = time.strftime("%H:%M:%S", time.localtime(snap.t))
            parts = ["gputui", host, src, f"sample {when}"]
            if self.source.kind == "replay":
                parts.append(f"recorded phase: {snap.phase}" if snap.phase else "")
                if self.ended:
                    parts.append("replay ended (q to quit)")
            else:
                limit = 3 * self.source.next_delay() + 2
                stale = age > limit
                parts.append(
                    f"STALE: no sample for {age:.0f} s (NVML not answering?)"
                    if stale
                    else f"{age:.1f} s ago"
                )
            if self.sampler.paused:
                parts.append("PAUSED")
            text = " · ".join(p for p in parts if p)
        if text != self._status_text:
            status.set_text(Text(text, no_wrap=True, overflow="ellipsis"))
            self._status_text = text
        status.set_class(stale, "-stale")
        for panel in self.query(GpuPanel):
            panel.set_class(stale, "-stale")

    # -- actions
    def action_help(self) -> None:
        notes = (
            "Marks: SUSPECT = the rank the hang detector names (not spinning while its peers "
            "spin in a collective); waiting = a rank spinning in a collective.\n"
            "Data older than 3 sample intervals is shown as STALE."
        )
        self.push_screen(HelpScreen(list(self.BINDINGS), notes))  # type: ignore[arg-type]

    def action_sort(self) -> None:
        by = self.query_one(ProcessTable).cycle_sort()
        if self.snapshot:
            self._render_snapshot()
        self.notify(f"sorted by {by}", timeout=2)

    def action_pause(self) -> None:
        self.sampler.pause(not self.sampler.paused)
        self._refresh_status()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("-show")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self._set_filter(event.value)

    def on_key(self, event: Any) -> None:
        box = self.query_one("#filter", Input)
        if event.key == "escape" and box.has_focus:
            box.value = ""
            self._set_filter("")
            event.stop()

    def _set_filter(self, text: str) -> None:
        box = self.query_one("#filter", Input)
        table = self.query_one(ProcessTable)
        table.filter_text = text.strip()
        box.set_class(bool(table.filter_text), "-show")
        table.focus()
        if self.snapshot:
            self._render_snapshot()

    def action_jump_suspect(self) -> None:
        v, snap = self.verdict, self.snapshot
        if v is None or snap is None or v.state == "ok":
            self.notify("no stalled job: nothing to jump to", timeout=3)
            return
        table = self.query_one(ProcessTable)
        pids = list(getattr(v, "suspect_pids", ()))
        pids += [p.pid for p in snap.processes if set(p.gpus) & set(v.suspects)]
        for pid in pids:
            if table.select_pid(pid):
                table.focus()
                return
        gpus = ", ".join(map(str, v.suspects)) or "none"
        self.notify(
            f"suspect GPU {gpus} has no process any more: its rank has exited; "
            "dump the waiting ranks (a) to see where they wait",
            timeout=6,
        )

    def selected_process(self) -> ProcessInfo | None:
        p = self.query_one(ProcessTable).selected()
        if p is None:
            self.notify("select a process first (up/down in the table)", timeout=3)
        return p
