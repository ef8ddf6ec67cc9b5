"""A modal pane that runs one attach tool in a thread and streams its output.

The tool (py-spy, gdb, strace, dump-all, bundle) runs in a thread worker, never on the UI
thread; its lines are collected under a lock and written to the log on a timer in batches,
so a fast strace cannot flood the event loop. Closing the pane (escape, q) sets the cancel
event: the tools layer then kills the tool's process group, and the target is checked and
resumed if needed. The dashboard keeps sampling underneath: this is only a screen on top.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Footer, RichLog

from gputui.collect.model import Job, ProcessInfo, Snapshot
from gputui.redact import redact_text
from gputui.textsafe import clean
from gputui.tools.result import Cancel, LineSink, Outcome, ToolResult
from gputui.ui.keys import screen_bindings
from gputui.ui.widgets.palette import role
from gputui.ui.widgets.safe_text import Static, Text

if TYPE_CHECKING:
    from gputui.watch.settings import WatchSettings

ToolCall = Callable[[LineSink, Cancel], Any]
"""Runs a tool: `(on_line, cancel) -> ToolResult | DumpAll | BundleReport` (has summary_lines)."""

FLUSH_S = 0.1  # at most 10 log updates a second, however fast the tool writes
MAX_SHOWN = 5000  # lines kept in the log widget; the whole output is kept for saving
MAX_KEPT = 200_000


class ToolFinished(Message):
    """Posted from the worker thread when the tool has returned."""

    def __init__(self, result: Any) -> None:
        super().__init__()
        self.result = result


class ToolPane(ModalScreen[None]):
    """Streams one tool's output; `s` saves it, escape/q closes the pane and stops the tool."""

    BINDINGS = screen_bindings("tool_pane")
    DEFAULT_CSS = """
    ToolPane { align: center middle; }
    ToolPane > Vertical { width: 95%; height: 90%; border: round $primary;
        background: $surface; }
    ToolPane #tool-title { height: 1; padding: 0 1; text-style: bold;
        background: $primary-background; }
    ToolPane RichLog { height: 1fr; padding: 0 1; }
    ToolPane #tool-outcome { height: auto; max-height: 6; padding: 0 1; }
    ToolPane #tool-outcome.-ok { color: $success; }
    ToolPane #tool-outcome.-bad { color: $error; text-style: bold; }
    """

    def __init__(self, title: str, run: ToolCall, *, save_dir: Path | None = None) -> None:
        super().__init__()
        self.pane_title = title
        self.run_call = run
        self.save_dir = save_dir
        self.cancel = threading.Event()
        self.lines: list[str] = []  # everything the tool wrote (redacted), for saving
        self.result: Any = None  # set once the tool has returned
        self.finished = threading.Event()
        self._pending: list[str] = []
        self._lock = threading.Lock()

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.pane_title, id="tool-title", markup=False)
            yield RichLog(max_lines=MAX_SHOWN, wrap=False, markup=False, auto_scroll=True)
            yield Static("running... (escape stops it)", id="tool-outcome", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(FLUSH_S, self._flush)
        self._run()

    # ------------------------------------------------------------ worker thread side

    def _on_line(self, line: str) -> None:
        # The tools layer has redacted the line already (gputui.tools.runner).
        with self._lock:
            self._pending.append(line)

    @work(thread=True, exclusive=True, exit_on_error=False, group="tool")
    def _run(self) -> None:
        try:
            result = self.run_call(self._on_line, self.cancel)
        except Exception as e:  # a bug in a tool must end as a message, not a dead pane
            result = ToolResult("tool", None, Outcome.FAILED, f"{type(e).__name__}: {e}")
        self.result = result
        self.finished.set()
        self.post_message(ToolFinished(result))

    # ------------------------------------------------------------ UI thread side

    def _flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        if len(self.lines) < MAX_KEPT:
            self.lines.extend(batch[: MAX_KEPT - len(self.lines)])
        self.query_one(RichLog).write(Text("\n".join(batch[-MAX_SHOWN:])))

    def on_tool_finished(self, msg: ToolFinished) -> None:
        self._flush()
        self.show_result(msg.result)

    def show_result(self, result: Any) -> None:
        """Put the outcome under the output; subclasses render richer results."""
        lines = [redact_text(s) for s in result.summary_lines()]
        box = self.query_one("#tool-outcome", Static)
        box.update("\n".join(lines))
        box.set_class(bool(result.ok), "-ok")
        box.set_class(not result.ok, "-bad")

    def on_unmount(self) -> None:
        self.cancel.set()  # the app is closing under us: do not leave the tool running

    def action_close(self) -> None:
        self.cancel.set()  # the tools layer kills the tool's process group
        self.dismiss(None)

    def output_text(self) -> str:
        self._flush()
        tail = self.result.summary_lines() if self.result is not None else ["(still running)"]
        return "\n".join([*self.lines, "", *(redact_text(s) for s in tail)]) + "\n"

    def action_save(self) -> None:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.pane_title).strip("-").lower()[:60] or "tool"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = (self.save_dir or Path.cwd()) / f"gputui-{slug}-{stamp}.txt"
        try:
            path.write_text(self.output_text(), encoding="utf-8")
        except OSError as e:
            self.notify(f"could not save to {path}: {e.strerror or e}", severity="error")
            return
        self.notify(f"saved to {path.resolve()}", timeout=6)


class DumpAllPane(ToolPane):
    """Dump-all-ranks: progress while it runs, then the grouped stacks, odd group marked."""

    def show_result(self, result: Any) -> None:
        render = getattr(result, "render", None)
        if not callable(render):
            super().show_result(result)
            return
        log = self.query_one(RichLog)
        log.clear()
        styles = {"odd-header": "@hung", "header": "bold", "note": "italic"}
        for text, kind in render():
            self.lines.append(text)
            log.write(Text(text, style=role(styles.get(kind, ""))))
        super().show_result(result)


# ---------------------------------------------------------------- what the dashboard calls


def py_spy_pane(proc: ProcessInfo, native: bool = False) -> ToolPane:
    from gputui.tools.attach.stacks import py_spy_dump

    what = "py-spy dump --native" if native else "py-spy dump"
    return ToolPane(
        f"{what}  pid {proc.pid}  {proc.command[:80]}",
        lambda on_line, cancel: py_spy_dump(proc, native=native, on_line=on_line, cancel=cancel),
    )


def gdb_pane(proc: ProcessInfo) -> ToolPane:
    from gputui.tools.attach.stacks import gdb_backtrace

    return ToolPane(
        f"gdb/cuda-gdb: all threads  pid {proc.pid}  (cuda-gdb may take 15 s)",
        lambda on_line, cancel: gdb_backtrace(proc, on_line=on_line, cancel=cancel),
    )


def core_pane(core: str, who: str) -> ToolPane:
    """gdb's backtrace of every thread of a crashed rank's core file (as `gputui dump
    --core`); gdb answers at once, so its lines are shown when it is done."""
    from gputui.tools.attach.core import core_backtrace

    def run(on_line: LineSink, cancel: Cancel) -> Any:
        res = core_backtrace(core)
        for line in res.lines:  # redacted by the tools layer
            on_line(line)
        return res

    return ToolPane(f"gdb: the core of {who}  {core}", run)


def strace_pane(proc: ProcessInfo, seconds: float = 30.0) -> ToolPane:
    from gputui.tools.attach.strace import strace_follow

    return ToolPane(
        f"strace -f -tt  pid {proc.pid}  (up to {seconds:g} s; escape stops it)",
        lambda on_line, cancel: strace_follow(
            proc, seconds=seconds, on_line=on_line, cancel=cancel
        ),
    )


def profile_pane(proc: ProcessInfo, seconds: float | None = None) -> ToolPane:
    """`w`: where the selected process spends its time, by py-spy record."""
    from gputui.tools.attach.profile import PROFILE_SECONDS, profile_rank

    secs = seconds or PROFILE_SECONDS

    def call(on_line: LineSink, cancel: Cancel) -> ToolResult:
        prof = profile_rank(proc, seconds=secs, cancel=cancel)
        for line in prof.lines():
            on_line(line)
        return prof.result

    return ToolPane(
        f"py-spy record {secs:g} s (top functions)  pid {proc.pid}  {proc.command[:60]}", call
    )


def dump_all_pane(job: Job, snapshot: Snapshot, native: bool = False) -> DumpAllPane:
    from gputui.tools.attach.dumpall import dump_all

    procs: Sequence[ProcessInfo | int] = [snapshot.process(p) or p for p in job.pids]
    return DumpAllPane(
        f"dump all ranks: {job.label}",
        lambda on_line, cancel: dump_all(
            procs, native=native, on_line=on_line, cancel=cancel, how=job.how
        ),
    )


def bundle_pane(
    snapshots: Sequence[Snapshot],
    verdict: Any | None = None,
    out_dir: Path | None = None,
    settings: WatchSettings | None = None,
    processes: Sequence[ProcessInfo | int] | None = None,
    recorded_node: str | None = None,
    made_from: str | None = None,
    records: Sequence[dict[str, Any]] = (),
) -> ToolPane:
    """The pane that writes an incident bundle; `settings`: the thresholds the bundle
    judges its samples with when `verdict` is None (default: the command line's)."""
    from gputui.tools.bundle.write import write_bundle
    from gputui.watch.settings import WatchSettings

    s = settings if settings is not None else WatchSettings()
    return ToolPane(
        f"incident bundle -> {clean(str(out_dir))}" if out_dir is not None else "incident bundle",
        lambda on_line, cancel: write_bundle(
            out_dir,
            snapshots=list(snapshots),
            processes=processes,
            verdict=verdict,
            stall_after=s.stall_after,
            hang_after=s.hang_after,
            on_line=on_line,
            cancel=cancel,
            recorded_node=recorded_node,
            made_from=made_from,
            records=records,
        ),
    )
