"""The dashboard's start-up, headless: import time, time to the first painted snapshot, the
CPU spent until then and the peak RSS, each start in a fresh interpreter.

Why headless: a terminal runner (bench/app_cpu.py) measures the same thing from outside,
but needs a pty and the app's own output; this one runs the real start path of
`gputui` (gputui.commands.app: the source opened and first sampled in a thread while the
UI imports) under Textual's `run_test`, so it runs anywhere, also in CI and with no GPU
(live mode then shows the host's processes).

    python bench/first_frame.py                     # --demo and live, 5 starts each
    python bench/first_frame.py --modes live --starts 9 --json out.json

Wall time counts from just before the interpreter is started to the child's report that
the first snapshot is on screen (the interpreter's own start included); CPU time is the
child's user + system time at that moment; peak RSS its VmHWM then.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from common import ROOT, median, write_json  # type: ignore[import-not-found]

# The child: the dashboard's start, as gputui.commands.app.run() does it, under run_test.
CHILD = r"""
import os, sys, time
t0 = time.perf_counter()
import argparse
from gputui.commands.app import _open_in_background
from gputui.commands.common import add_app_args
p = argparse.ArgumentParser(); add_app_args(p)
args = p.parse_args(sys.argv[1:])
thread, result = _open_in_background(args)
from gputui.ui.app import GputuiApp
t_import = time.perf_counter() - t0
import asyncio
thread.join(30)
source, first = result[0]

async def main():
    app = GputuiApp(source, first=first, stall_after=args.stall_after,
                    hang_after=args.hang_after, auto_dump=False)
    async with app.run_test(size=(160, 50)) as pilot:
        deadline = time.monotonic() + 30
        while not app.first_snapshot.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        await pilot.pause()  # the frame with it is composed and painted
        t = time.perf_counter() - t0
        cpu = sum(os.times()[:2])
        with open("/proc/self/status") as f:
            hwm = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM"))
        print("PAINTED", t_import, t, cpu, hwm / 1024, flush=True)
        sys.stdout.flush()
        app.exit()
    app.sampler.stop()
    getattr(source, "leave", source.close)()

asyncio.run(main())
os._exit(0)
"""

MODES = {"demo": ["--demo"], "live": []}


def one_start(mode: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, *MODES[mode]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        for line in p.stdout or ():
            if line.startswith("PAINTED"):
                wall = time.perf_counter() - t0
                _, imp, t_in, cpu, rss = line.split()
                p.wait(30)
                return {
                    "wall_s": wall,
                    "import_s": float(imp),
                    "in_process_s": float(t_in),
                    "cpu_s": float(cpu),
                    "rss_mib": float(rss),
                }
        err = p.stderr.read() if p.stderr else ""
        raise RuntimeError(f"{mode}: no first frame: {err[-800:]}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def run(modes: list[str], starts: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    samples: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for _ in range(starts):  # alternate the modes, so a noisy moment hits both
        for m in modes:
            samples[m].append(one_start(m))
    for m, xs in samples.items():
        out[m] = {k: median([x[k] for x in xs]) for k in xs[0]}
        out[m]["starts"] = len(xs)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", nargs="+", choices=sorted(MODES), default=["demo", "live"])
    ap.add_argument("--starts", type=int, default=5, help="starts of each mode (median)")
    ap.add_argument("--json", help="write the result here")
    a = ap.parse_args()
    res = run(a.modes, a.starts)
    print(f"{'mode':6} {'import s':>9} {'first frame s':>14} {'CPU s':>7} {'peak RSS MiB':>13}")
    for m, r in res.items():
        print(
            f"{m:6} {r['import_s']:9.3f} {r['wall_s']:14.3f} {r['cpu_s']:7.3f} {r['rss_mib']:13.1f}"
        )
    write_json(a.json, "first_frame", res)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
