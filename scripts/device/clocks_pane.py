"""The clocks pane (`C`) of the running dashboard against nvidia-smi, on a GPU node.

    python3 scripts/device/clocks_pane.py --out DIR [--polls 5] [--dry]

Starts the dashboard headless (Textual's test driver, 80x24) on the live source, presses
`C`, and for each of --polls new samples reads the pane's rows off the screen and asks
nvidia-smi for the same GPUs' SM clock and active clock event reasons (the bitmask), at
once. Writes DIR/clocks_pane.json (every poll: the pane's rows, nvidia-smi's) and
DIR/clocks_pane.txt (the last screen), and prints one PASS/FAIL line per GPU: PASS when the
pane has a row for the GPU in every poll, and in at least one poll its SM clock is within
10% of nvidia-smi's and its reasons are the words of nvidia-smi's bitmask.

--dry: no GPU (a CPU box): the bundled demo recording instead of the live source, and no
nvidia-smi; it checks only that the pane opens and has a row per recorded GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from screen import screen_text  # noqa: E402

from gputui.diagnose.slow.clocks import clock_reasons  # noqa: E402
from gputui.ui.app import GputuiApp  # noqa: E402
from gputui.ui.screens.clocks import ClocksScreen  # noqa: E402

ROW = re.compile(r"^\s*(\d+)\s+(\d+) MHz\s+.*?W\s+(.*?)\s*$")


def smi() -> dict[int, tuple[float, list[str]]]:
    """GPU index -> (SM MHz, the reasons' words) as nvidia-smi reads them now."""
    for reasons in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
        run = subprocess.run(  # noqa: S603 (a fixed argument list)
            [
                "nvidia-smi",
                f"--query-gpu=index,clocks.sm,{reasons}",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if run.returncode == 0:  # older drivers know the reasons by their former name
            break
    out = run.stdout
    got = {}
    for line in out.splitlines():
        i, sm, mask = (x.strip() for x in line.split(","))
        got[int(i)] = (float(sm), clock_reasons(int(mask, 16)))
    return got


def rows(lines: list[str]) -> dict[int, tuple[float, str]]:
    """GPU index -> (SM MHz, reasons text) of the pane's rows on screen."""
    found = {}
    for ln in lines:
        m = ROW.match(ln.strip(" │"))
        if m:
            found[int(m.group(1))] = (float(m.group(2)), m.group(3))
    return found


async def main(out: Path, polls: int, dry: bool) -> int:
    if dry:
        from gputui.collect.source import ReplaySource

        source = ReplaySource.demo(realtime=True)
    else:
        from gputui.collect.live import LiveSource

        source = LiveSource(interval=1.0)
    app = GputuiApp(source)
    seen: list[dict[str, object]] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await asyncio.wait_for(app.first_snapshot.wait(), 60)
        await pilot.press("C")
        assert isinstance(app.screen, ClocksScreen), "C did not open the clocks pane"
        for _ in range(polls):
            before = app.snapshot
            for _ in range(100):  # a new sample, then the pane's 1 s follow: 10 s at most
                await pilot.pause(0.1)
                if app.snapshot is not before and app.screen.shown is app.snapshot:  # type: ignore[attr-defined]
                    break
            pane = rows(screen_text(app))
            truth = {} if dry else smi()
            seen.append({"pane": pane, "nvidia_smi": truth})
        (out / "clocks_pane.txt").write_text("\n".join(screen_text(app)) + "\n")
    (out / "clocks_pane.json").write_text(json.dumps(seen, indent=1))
    gpus = sorted({g.index for g in (app.snapshot.gpus if app.snapshot else ())})
    bad = 0
    for i in gpus:
        present = all(i in s["pane"] for s in seen)  # type: ignore[operator]
        agree = dry or any(
            i in s["pane"]
            and i in s["nvidia_smi"]
            and abs(s["pane"][i][0] - s["nvidia_smi"][i][0]) <= 0.1 * s["nvidia_smi"][i][0]  # type: ignore[index]
            and s["pane"][i][1] == (", ".join(s["nvidia_smi"][i][1]) or "none")  # type: ignore[index]
            for s in seen
        )
        ok = present and agree
        bad += not ok
        last = seen[-1]
        print(
            f"{'PASS' if ok else 'FAIL'} GPU {i}: pane {last['pane'].get(i)}"  # type: ignore[attr-defined]
            f" nvidia-smi {last['nvidia_smi'].get(i) if not dry else '-'}",  # type: ignore[attr-defined]
            flush=True,
        )
    if not gpus:
        print("FAIL no GPU in the samples", flush=True)
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--polls", type=int, default=5)
    ap.add_argument("--dry", action="store_true")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    sys.exit(asyncio.run(main(a.out, a.polls, a.dry)))
