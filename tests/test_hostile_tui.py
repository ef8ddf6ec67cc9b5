"""The dashboard replays hostile-but-accepted recordings without raising, at 80 x 24.

The reader refuses structural damage; what it accepts can still be strange: escape
sequences and lone surrogates in names and command lines, NaN and 1e999 readings shown as
N/A, a LOCAL_WORLD_SIZE of a trillion, 64 GPUs, 256 processes per GPU, command lines and
strings at their bounds, a month between two samples, duplicated lines, typed records.
Each is replayed through the real app (only `GputuiApp(source)`, `run_test`,
`ended_event` and `pilot.press` are used, so the test holds while the widgets change);
`run_test` re-raises whatever crashed the app.
"""

from __future__ import annotations

import asyncio

import pytest
from hostile_corpus import OK, corpus, materialize

from gputui.collect.source import ReplaySource
from gputui.collect.trace.format import read_trace
from gputui.ui.app import GputuiApp

pytestmark = pytest.mark.hostile

TUI_CASES = [
    "kitchen_sink",  # escapes, surrogates, N/A readings, huge ranks, a long command line
    "64_gpus",
    "256_pids_per_gpu",
    "256_procs_per_line",
    "a_month_between_samples",
    "every_line_twice",
    "meta.host_escapes",
    "record_lagging",
]


@pytest.fixture(scope="module")
def accepted(tmp_path_factory):
    wanted = [c for c in corpus() if c.name in TUI_CASES]
    assert len(wanted) == len(TUI_CASES) and all(c.expect == OK for c in wanted)
    return materialize(wanted, tmp_path_factory.mktemp("tui"))


async def test_the_dashboard_replays_accepted_hostile_recordings_without_raising(accepted):
    for case, path in accepted:
        source = ReplaySource(read_trace(path), name=case.name, realtime=False)
        app = GputuiApp(source)
        try:
            async with app.run_test(size=(80, 24)) as pilot:
                await asyncio.wait_for(app.ended_event.wait(), 30)
                await pilot.pause()
                await pilot.press("q")
        except Exception as e:  # noqa: BLE001 - name the case that crashed it
            pytest.fail(f"{case.name}: the dashboard raised {type(e).__name__}: {e}")
