"""Generate the SVG screenshots of the README and docs/ from the bundled demo recording.

    python scripts/screenshots.py            # writes screenshots/*.svg (docs/screenshots
                                             # is a link to it: the docs site has them too)
    python scripts/screenshots.py help demo-1-stall-80x24   # only these

Each shot replays a window of the real 2 x H200 recording as fast as possible (so the
result does not depend on timing), waits for the replay to end, presses keys as a person
would, and saves what the terminal shows.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

os.environ["TZ"] = "UTC"
time.tzset()  # the C library reads TZ only here

from gputui.collect.model import Snapshot  # noqa: E402
from gputui.collect.source import ReplaySource, demo_path  # noqa: E402
from gputui.collect.trace.format import read_trace  # noqa: E402
from gputui.ui.actions.story import DemoStory  # noqa: E402
from gputui.ui.app import GputuiApp  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "screenshots"
SIZE = (140, 40)


def window(snaps: list[Snapshot], phase: str, seconds: float) -> ReplaySource:
    """`seconds` of the recording from the start of `phase`, replayed back to back."""
    start = next(i for i, s in enumerate(snaps) if s.phase == phase)
    t0 = snaps[start].t
    part = [s for s in snaps[max(0, start - 60) :] if s.t - t0 <= seconds]
    return ReplaySource(part, name="demo (real 2 x H200 NCCL hang)", realtime=False)


async def shoot(
    name: str,
    source: ReplaySource,
    keys: tuple[str, ...] = (),
    then: Callable[[GputuiApp], Awaitable[None]] | None = None,
    size: tuple[int, int] = SIZE,
    **app_kw: object,
) -> Path:
    app = GputuiApp(source, **app_kw)  # type: ignore[arg-type]
    async with app.run_test(size=size) as pilot:
        await asyncio.wait_for(app.ended_event.wait(), 60)
        await pilot.pause()
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
        if then is not None:
            await then(app)
        await pilot.pause()
        path = OUT / f"{name}.svg"
        app.save_screenshot(filename=path.name, path=str(OUT))
    return path


async def shoot_story(name: str, chapter: int, size: tuple[int, int] = (80, 24)) -> Path:
    """The guided demo (`gputui --demo`) held at its chapter `chapter` (0: the stall with its
    culprit, 1: the dead rank), replayed as fast as possible up to there."""
    source = ReplaySource.demo(realtime=False)
    app = GputuiApp(source, story=DemoStory(snaps=source.snaps))
    async with app.run_test(size=size) as pilot:
        for i in range(chapter + 1):
            while app.story is None or app.story.holding != i:
                await asyncio.sleep(0.05)
            if i < chapter:
                await pilot.press("space")
        await pilot.pause()
        await pilot.pause()
        app.save_screenshot(filename=f"{name}.svg", path=str(OUT))
    return OUT / f"{name}.svg"


async def _probe_done(app: GputuiApp) -> None:
    """Wait for the probe screen (opened with P) to finish its real gloo run."""
    screen = app.screen
    await asyncio.wait_for(asyncio.to_thread(screen.finished.wait, 120), 130)  # type: ignore[attr-defined]
    await asyncio.sleep(0.2)  # let the final matrix render


async def main(only: list[str]) -> None:
    OUT.mkdir(exist_ok=True)
    snaps = read_trace(demo_path())
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from hangs import eight_gpu_hang

    async def probe() -> Path:
        # P from the demo: 4 simulated devices over gloo, the same code path as on GPUs
        with tempfile.TemporaryDirectory() as tmp:
            return await shoot(
                "probe",
                window(snaps, "train", 3.0),
                keys=("P",),
                then=_probe_done,
                probe_args={"backend": "gloo", "cpu": 4, "save_dir": Path(tmp)},
            )

    shots: dict[str, Callable[[], Awaitable[Path]]] = {
        "probe": probe,
        "dashboard-rank-died": lambda: shoot(
            "dashboard-rank-died", window(snaps, "rank_dies", 12.7)
        ),
        "dashboard-hang": lambda: shoot("dashboard-hang", window(snaps, "stall_in_loop", 20.0)),
        "dashboard-80x24": lambda: shoot(
            "dashboard-80x24", window(snaps, "stall_in_loop", 20.0), size=(80, 24)
        ),
        "dashboard-light-80x24": lambda: shoot(  # --theme textual-light (ansi-light too)
            "dashboard-light-80x24",
            window(snaps, "stall_in_loop", 20.0),
            size=(80, 24),
            theme="textual-light",
        ),
        "dashboard-8gpu-120x40": lambda: shoot(
            "dashboard-8gpu-120x40", eight_gpu_hang(), size=(120, 40)
        ),
        "dashboard-healthy": lambda: shoot("dashboard-healthy", window(snaps, "comm_heavy", 10.0)),
        "details": lambda: shoot(
            "details", window(snaps, "stall_in_loop", 20.0), keys=("d",), size=(100, 40)
        ),
        "help": lambda: shoot(
            "help", window(snaps, "train", 3.0), keys=("question_mark",), size=(80, 40)
        ),
        "clocks-80x24": lambda: shoot(
            "clocks-80x24", window(snaps, "train", 3.0), keys=("C",), size=(80, 24)
        ),
        "demo-1-stall-80x24": lambda: shoot_story("demo-1-stall-80x24", 0),
        "demo-2-dead-rank-80x24": lambda: shoot_story("demo-2-dead-rank-80x24", 1),
    }
    unknown = [n for n in only if n not in shots]
    if unknown:
        raise SystemExit(f"no such screenshot: {', '.join(unknown)} (have: {', '.join(shots)})")
    for name in only or shots:
        print(await shots[name]())


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
