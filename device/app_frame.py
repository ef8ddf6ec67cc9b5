"""Run the real dashboard headless against live NVML for a few seconds; save an SVG frame
and print the GPU panels' text, so a device run shows what a person would see."""

import asyncio
import sys

from gputui.collect.live import LiveSource
from gputui.ui.app import GputuiApp
from gputui.ui.gpu_panel import GpuPanel
from gputui.ui.process_table import ProcessTable


async def main(out: str, seconds: float) -> None:
    app = GputuiApp(LiveSource(interval=0.5))
    async with app.run_test(size=(150, 45)) as pilot:
        await asyncio.wait_for(app.first_snapshot.wait(), 30)
        await asyncio.sleep(seconds)  # let history (and the detector window) fill: a demo run
        await pilot.pause()
        for p in app.query(GpuPanel):
            print(p.render_text().plain)
        t = app.query_one(ProcessTable)
        for pr in t.procs.values():
            print(pr.pid, pr.gpus, pr.rank, pr.state, pr.command[:80])
        print(
            "banner:",
            app.verdict.state if app.verdict else None,
            app.verdict.reason if app.verdict else "",
        )
        app.save_screenshot(filename=out.rsplit("/", 1)[-1], path=out.rsplit("/", 1)[0])


asyncio.run(main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 4.0))
