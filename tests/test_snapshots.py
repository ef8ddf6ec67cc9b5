"""SVG snapshots of the dashboard at the sizes people have, from the bundled real recording
(and an 8-GPU hang built from its readings). What each must show is asserted in
tests/test_app.py; these catch any other change to what is drawn.

Update after an intended UI change with: python -m pytest tests/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hangs import eight_gpu_hang
from screen import run_to_end

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from gputui.ui.app import GputuiApp  # noqa: E402
from screenshots import window  # noqa: E402


async def _until_replay_ends(pilot) -> None:
    await run_to_end(pilot.app, pilot)


@pytest.mark.parametrize(
    "size, phase, seconds, keys",
    [
        ((80, 24), "stall_in_loop", 20.0, ()),  # the hang: suspect selected by itself
        ((100, 30), "stall_in_loop", 20.0, ()),
        ((120, 40), "8gpu", 16.0, ()),
        ((200, 60), "8gpu", 16.0, ()),
        ((200, 60), "stall_in_loop", 20.0, ()),
        ((140, 40), "comm_heavy", 10.0, ()),  # healthy all_reduce traffic: no alarm
        ((80, 40), "train", 3.0, ("question_mark",)),  # the help screen
        ((80, 24), "train", 3.0, ("C",)),  # the clocks pane: both GPUs at the power cap
    ],
    ids=["80x24", "100x30", "120x40-8gpu", "200x60-8gpu", "200x60", "healthy", "help", "clocks"],
)
def test_dashboard_snapshot(snap_compare, demo_snaps, size, phase, seconds, keys):
    source = eight_gpu_hang(seconds) if phase == "8gpu" else window(demo_snaps, phase, seconds)
    app = GputuiApp(source)
    assert snap_compare(app, terminal_size=size, run_before=_until_replay_ends, press=keys)


@pytest.mark.parametrize("theme", ["textual-light", "ansi-light", "ansi-dark"])
def test_the_hang_at_80x24_in_each_theme_that_matters(snap_compare, demo_snaps, theme):
    """Light terminals (textual-light; ansi-light keeps the terminal's own colours) and
    ansi-dark: the default, textual-dark, is the snapshots above."""
    app = GputuiApp(window(demo_snaps, "stall_in_loop", 20.0), theme=theme)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_until_replay_ends)
