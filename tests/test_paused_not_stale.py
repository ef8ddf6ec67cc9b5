"""A paused dashboard is paused, not stale.

Round four of the hostile sweep: after `space` the status line said "PAUSED" for a few
seconds, then "STALE: no sample for 9 s (NVML not answering?)": no sample is asked for while
paused, so the age of the last one says nothing about NVML. The age is moved here, not
waited for: the last sample is made a minute old.
"""

from __future__ import annotations

import asyncio

from screen import Answering, on_screen

from gputui.ui.app import GputuiApp


async def test_a_paused_dashboard_never_says_stale_and_counts_from_its_resume(demo_snaps):
    app = GputuiApp(Answering(demo_snaps[100], delay=0.5))
    async with app.run_test(size=(100, 30)) as pilot:
        await asyncio.wait_for(app.first_snapshot.wait(), 30)
        await pilot.press("space")
        assert app.sampler.paused
        app.received_at -= 60  # a minute without a sample, as a long pause gives
        app._check_stale()
        await pilot.pause()
        assert on_screen(app, "PAUSED") and not on_screen(app, "STALE")
        await pilot.press("space")  # resumed: the minute paused is not counted as late
        assert not app.sampler.paused and not app._is_stale()
        app.received_at -= 60
        app.paused_until -= 60  # control: a minute late after the resume is stale
        assert app._is_stale()
