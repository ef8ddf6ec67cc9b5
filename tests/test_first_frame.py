"""The dashboard's first frame: the first sample on screen at once, everything else after.

`gputui` takes its first sample while Textual imports (gputui.commands.app) and draws it in
the very first frame, before the hang detector has judged it: the detector, and the evidence
machinery it starts (health words, rank I/O, the rendezvous watch, explainers), is imported
and run on the sampler thread once that frame is painted. These tests hold the detector back
to see the frame without it, and check what the start imports.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

from hangs import hang_window
from screen import on_screen, until

from gputui.collect.sampler import Sampler
from gputui.ui.app import GputuiApp

# Modules the first frame does not need: imported at the first stall, health record or
# update, never by importing the dashboard and making its Watcher.
NOT_AT_START = (
    "gputui.diagnose.hang.detector",
    "gputui.diagnose.evidence",
    "gputui.diagnose.health.judge",
    "gputui.diagnose.health.findings",
    "gputui.diagnose.hang.rendezvous",
    "gputui.tools.gather.rendezvous",
    "gputui.tools.attach.stacks",
    "gputui.collect.procs.rankio",
    "gputui.collect.procs.hostranks",
    "gputui.collect.frames",
    "gputui.collect.trace.read",
    "gputui.redact",
)


async def test_the_first_sample_is_drawn_before_the_detector_judges_it_off_the_ui_thread(
    demo_snaps,
):
    source = hang_window(demo_snaps)
    first = source.sample()
    app = GputuiApp(source, first=first)
    release = threading.Event()
    calls: list[tuple[bool, bool]] = []
    update = app.watcher.update

    def held_update(snap):
        calls.append((threading.current_thread() is threading.main_thread(), snap is first))
        release.wait(30)  # the sampler thread waits here; the UI does not
        return update(snap)

    app.watcher.update = held_update  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: on_screen(app, "H200") and bool(calls))
        assert app.snapshot is first and app.verdict is None  # drawn, not judged yet
        assert any(r.proc is not None for r in app.table.rows), "its processes are listed"
        release.set()
        await asyncio.wait_for(app.first_snapshot.wait(), 30)
        assert app.verdict is not None
    assert calls[0] == (False, True), "the first sample was judged on the sampler thread"


def test_the_sampler_hands_on_the_first_sample_before_taking_its_own():
    events: list[str] = []
    done = threading.Event()

    class One:
        kind = "replay"

        def __init__(self) -> None:
            self.left = 1

        def sample(self):
            events.append("sampled")
            self.left -= 1
            return "second" if self.left >= 0 else None

        def next_delay(self) -> float:
            return 0.0

    sampler = Sampler(One(), lambda s: events.append(s), on_end=done.set)
    sampler.start(delay=0.0, first="first")  # type: ignore[arg-type]
    assert done.wait(30)
    assert events == ["first", "sampled", "second", "sampled"]


def test_importing_the_dashboard_and_making_its_watcher_imports_no_evidence_machinery():
    code = (
        "import sys, json; import gputui.ui.app, gputui.commands.app; "
        "from gputui.watch.watcher import Watcher; Watcher(live=True).close(); "
        f"print(json.dumps([m for m in {list(NOT_AT_START)!r} if m in sys.modules]))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []


def test_the_first_update_brings_the_detector_and_the_rendezvous_watch(demo_snaps):
    """What start-up left out comes at the first sample, where it is needed."""
    from gputui.watch.watcher import Watcher

    w = Watcher(live=False)
    try:
        assert w.rendezvous is None and w._detector is None
        v = w.update(demo_snaps[0])
        assert v is not None and w._detector is not None and w.rendezvous is not None
    finally:
        w.close()
