"""A slow job in the dashboard at 80x24: the straggler's row says SLOW, each waiting rank's
its wait share, the banner says slow, and `w` shows where the straggler's time goes (py-spy
record of a real CPU-bound gloo rank)."""

from __future__ import annotations

import time

from screen import on_screen, until
from straggler_job import gloo_straggler_job
from synth import with_real_pids
from test_tool_pane import log_text, needs_py_spy

from gputui.collect.model import Snapshot
from gputui.ui.app import GputuiApp
from gputui.ui.screens.tool_pane import ToolPane
from gputui.ui.widgets.process_table import ProcessTable


class SlowJobSource:
    """A live source over a real job: its real processes behind synthetic GPU readings (rank
    0 computing, rank 1 waiting, as on the 4 x H200 recording), one sample per second of
    sample time so the detector's window fills in a fraction of a real second."""

    kind = "host"
    description = "test: a real gloo job with a straggler"

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.k = pids, 0

    def sample(self) -> Snapshot | None:
        self.k += 1
        return with_real_pids(time.time() + self.k, self.pids, ["compute", "slow_peer"])

    def next_delay(self) -> float:
        return 0.05

    def close(self) -> None:
        pass


def flags(app: GputuiApp) -> dict[int, str]:
    return {r.proc.pid: r.flag for r in app.query_one(ProcessTable).rows if r.proc is not None}


@needs_py_spy
async def test_the_straggler_stands_out_at_80x24_and_w_shows_its_top_functions():
    with gloo_straggler_job() as pids:
        app = GputuiApp(SlowJobSource(pids))
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: flags(app).get(pids[0]) == "straggler")
            assert flags(app)[pids[1]] == "wait:100"
            assert on_screen(app, "SLOW") and on_screen(app, "100%")
            assert on_screen(app, "is the straggler")
            await pilot.press("down")  # select rank 1...
            assert app.selected_process().pid == pids[1]
            # ...and j selects the straggler, as it does a suspect. j acts on the verdict of the
            # moment: in one CI run under load it left rank 1 selected. Unconfirmed why; a
            # verdict that was not `slow` for that sample fits (j then jumps nowhere). So j is
            # pressed again, up to 20 s, while the straggler is flagged; each try's verdict is
            # kept for the failure message.
            seen: list[tuple[str, int]] = []
            deadline = time.monotonic() + 20
            while True:
                if flags(app).get(pids[0]) == "straggler":
                    await pilot.press("j")
                    got = app.selected_process().pid
                    seen.append((app.verdict.state if app.verdict else "none", got))
                    if got == pids[0]:
                        break
                assert time.monotonic() < deadline, seen
                await pilot.pause(0.2)
            await pilot.press("w")
            assert isinstance(app.screen, ToolPane)
            pane = app.screen
            await until(pilot, lambda: "crunch (gloo_straggler.py:" in log_text(pane), 30)
            assert "samples over" in log_text(pane)
            await pilot.press("escape")


def test_ranks_that_all_wait_alike_show_their_shares_and_no_straggler():
    from synth import timeline

    from gputui.diagnose.hang.detector import Detector
    from gputui.ui.widgets.straggler_view import flag_label, slow_flags

    det = Detector()
    cycle = [(0.75, ["slow_peer"] * 2), (0.5, ["compute"] * 2)] * 16
    for snap in timeline(*cycle):
        v = det.update(snap)
    assert v.state == "ok" and v.waiting_gpus == (0, 1)
    flags = slow_flags(v, snap)
    assert len(flags) == 2 and "straggler" not in flags.values()
    assert all(50 <= int(f.removeprefix("wait:")) <= 70 for f in flags.values())
    assert all(flag_label(f)[0].endswith("%") for f in flags.values())


def test_the_slow_sentence_wraps_whole_at_80_columns_as_a_stall_does():
    """4 GPUs, rank 2 the straggler: "slow: rank 2 (GPU 2) is the straggler; ranks 0, 1, 3
    (GPUs 0, 1, 3) wait for it in ..." is longer than 80 columns. It wraps under the SLOW
    badge onto as many lines as it needs (up to three), never cut mid-word."""
    from synth import timeline

    from gputui.diagnose.hang.detector import Detector
    from gputui.ui.widgets.banner import banner_height, banner_lines

    det = Detector()
    states = ["wait_2_5x", "wait_2_5x_warm", "compute", "wait_2_5x"]
    for snap in timeline((3, ["idle"] * 4), (20, states)):
        v = det.update(snap)
    assert v.state == "slow" and len(v.reason) > 80
    lines = [strip.text for strip in banner_lines(v, snap.t, 80)]
    assert len(lines) == banner_height(v, 80) >= 2
    assert all(len(line) <= 80 for line in lines) and "…" not in "".join(lines)
    said = " ".join(" ".join(line.split()) for line in lines)
    assert said.startswith("SLOW job h:29500: slow: rank 2 (GPU 2) is the straggler; ranks 0, 1, 3")
    assert said.endswith("over 20 s) · d why")  # the why (power, clocks) is behind d
