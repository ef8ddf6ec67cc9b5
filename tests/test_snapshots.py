"""SVG snapshots of the dashboard at a fixed size, from the bundled real recording.

Update after an intended UI change with: python -m pytest tests/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from gputui.ui.app import GputuiApp  # noqa: E402
from screenshots import SIZE, window  # noqa: E402


async def _until_replay_ends(pilot) -> None:
    await asyncio.wait_for(pilot.app.ended_event.wait(), 60)
    await pilot.pause()


@pytest.mark.parametrize(
    "phase, seconds, keys",
    [
        ("stall_in_loop", 20.0, ("j",)),  # the hang, suspect selected
        ("comm_heavy", 10.0, ()),  # healthy all_reduce traffic: no alarm
        ("train", 3.0, ("question_mark",)),  # the help screen
    ],
    ids=["hang", "healthy", "help"],
)
def test_dashboard_snapshot(snap_compare, demo_snaps, phase, seconds, keys):
    app = GputuiApp(window(demo_snaps, phase, seconds))
    assert snap_compare(app, terminal_size=SIZE, run_before=_until_replay_ends, press=keys)
