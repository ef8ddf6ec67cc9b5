"""Run the real dashboard headless against live NVML for a few seconds; save an SVG frame
and print what the screen shows (GPU lines, banner, process rows), so a device run shows
what a person would see."""

import asyncio
import sys

from gputui.collect.live import LiveSource
from gputui.ui.app import GputuiApp


async def main(out: str, seconds: float, size: tuple[int, int]) -> None:
    app = GputuiApp(LiveSource(interval=0.5))
    async with app.run_test(size=size) as pilot:
        await asyncio.wait_for(app.first_snapshot.wait(), 30)
        await asyncio.sleep(seconds)  # let history (and the detector window) fill: a demo run
        await pilot.pause()
        for strip in app.screen._compositor.render_strips():
            print(strip.text.rstrip())
        v = app.verdict
        print("banner:", v.state if v else None, v.reason if v else "")
        if v is not None and v.findings:
            print("findings:", " | ".join(v.findings))
        app.save_screenshot(filename=out.rsplit("/", 1)[-1], path=out.rsplit("/", 1)[0])


if __name__ == "__main__":
    cols, rows = (int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "150x45").split("x"))
    asyncio.run(main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 4.0, (cols, rows)))
