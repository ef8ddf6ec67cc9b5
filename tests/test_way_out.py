"""The way out (`X`): after the bundle, end every rank of the stuck job on this node.

A live node is stood in for by a source whose samples name real child processes of this test
as ranks 0 and 1 on two spinning GPUs (tests/synth.py readings); a third child is no rank and
must survive. Covers: `X` before the bundle refuses and signals nothing; after `b` has
written the bundle, `X` asks, naming the pids, and `y` ends both ranks; `n` ends nothing.
"""

from __future__ import annotations

import time

from screen import until
from synth import with_real_pids

from gputui.ui.app import GputuiApp
from gputui.ui.screens.dialogs import ConfirmDialog, WriteDialog
from gputui.ui.screens.tool_pane import ToolPane


class SpinningRanks:
    kind, description = "nvml", "test: real processes on spinning synthetic GPUs"

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    def sample(self):
        return with_real_pids(time.time(), self.pids, ["spin"] * len(self.pids))

    def next_delay(self) -> float:
        return 0.2

    def close(self) -> None:
        pass


def notes(app) -> list[str]:
    return [n.message for n in app._notifications]


def said(app) -> list[str]:
    """Every message the app says from now on: one replaces another on screen (a later
    notice may cover the refusal before the test looks), so they are kept here too."""
    out: list[str] = []
    notify = app.notify

    def keep(message, *args, **kw):
        out.append(message)
        return notify(message, *args, **kw)

    app.notify = keep
    return out


def gone(child) -> bool:
    return child.poll() is not None


async def stalled_app(pids, tmp_path):
    return GputuiApp(
        SpinningRanks(pids), stall_after=1.0, bundle_dir=tmp_path / "b", auto_dump=False
    )


async def test_x_ends_the_ranks_only_after_the_bundle_and_a_yes(spawn, tmp_path):
    ranks = [spawn(), spawn()]
    bystander = spawn()
    app = await stalled_app([r.pid for r in ranks], tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.verdict is not None and app.verdict.alarm)
        messages = said(app)
        # X acts on the verdict of the moment: on a loaded box a sample may lapse it, or
        # another test's job may stand in for a moment, so X is pressed until it answers.
        deadline = time.monotonic() + 30
        while not any("bundle first" in m for m in messages):
            assert time.monotonic() < deadline, messages
            await pilot.press("X")  # before the evidence is saved: refused
            await pilot.pause(0.5)
        assert not isinstance(app.screen, ConfirmDialog)
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, WriteDialog))
        await pilot.press("y")
        pane = app.screen
        assert isinstance(pane, ToolPane)
        await until(pilot, lambda: pane.finished.is_set(), timeout=60)
        assert pane.result.ok, pane.output_text()
        await pilot.press("escape")
        await pilot.press("X")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        question = app.screen.question
        assert f"pids {ranks[0].pid}, {ranks[1].pid}?" in question and "SIGKILL after" in question
        await pilot.press("n")  # no: nothing happens
        assert not isinstance(app.screen, ConfirmDialog) and not any(gone(r) for r in ranks)
        await pilot.press("X")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await until(pilot, lambda: all(gone(r) for r in ranks), timeout=30, why=messages)
        assert isinstance(app.screen, ToolPane)
        await until(pilot, lambda: app.screen.finished.is_set(), timeout=60)
        assert app.screen.result.ok, app.screen.output_text()
    assert not gone(bystander)
