"""The dashboard's start-up, headless: import time, time to the first painted snapshot, the
CPU spent until then and the peak RSS, each start in a fresh interpreter.

Why headless: a terminal runner (bench/app_cpu.py) measures the same thing from outside,
but needs a pty and the app's own output; this one runs the real start path of
`gputui` (gputui.commands.app: the source opened and first sampled in a thread while the
UI imports) under Textual's `run_test`, so it runs anywhere, also in CI and with no GPU
(live mode then shows the host's processes).

    python bench/first_frame.py                     # --demo and live, 5 starts each
    python bench/first_frame.py --modes live --starts 9 --json out.json
    python bench/first_frame.py --modes standin     # live, 2 GPUs of the stand-in NVML

`standin` is live mode with the repository's stand-in libnvidia-ml (tests/nvml_standin,
built here with gcc): two idle H200s answer, so the GPU path (NVML init, device list, GPU
lines) is timed on a machine without a GPU. On a GPU node, `live` times the real one.

First frame: from just before the interpreter is started (its own start included) to the
first frame Textual composes with a snapshot in it (every frame goes through App._display,
timed there); CPU is the child's user + system time at that moment, RSS its VmHWM (peak)
then. "verdict": the same at the first frame that carries the detector's verdict.
"modules": how many modules are imported at the first frame (`GPUTUI_BENCH_MODULES=FILE`
writes their names there, one a line).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, median, write_json  # type: ignore[import-not-found]

# The child: the dashboard's start, as gputui.commands.app.run() does it, under run_test.
CHILD = r"""
import os, sys, time
t0 = time.perf_counter()
import argparse
from gputui.commands.app import _app_class, _open_in_background
from gputui.commands.common import add_app_args
p = argparse.ArgumentParser(); add_app_args(p)
args = p.parse_args(sys.argv[1:])
thread, result = _open_in_background(args)
GputuiApp = _app_class()  # as the dashboard imports it: Textual without TLS
t_import = time.perf_counter() - t0
import asyncio
thread.join(30)
source, first = result[0]

def hwm():
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM")) / 1024

async def main():
    app = GputuiApp(source, first=first, stall_after=args.stall_after,
                    hang_after=args.hang_after, auto_dump=False)
    marks = {}
    display = app._display

    def timed(screen, renderable):  # every frame Textual composes goes through here
        display(screen, renderable)
        if renderable is None:
            return
        if app.snapshot is not None and "paint" not in marks:
            marks["paint"] = (time.perf_counter() - t0, sum(os.times()[:2]), hwm())
            marks["modules"] = len(sys.modules)
            if os.environ.get("GPUTUI_BENCH_MODULES"):  # the names, one a line
                with open(os.environ["GPUTUI_BENCH_MODULES"], "w") as f:
                    f.write("\n".join(sorted(sys.modules)) + "\n")
        if app.verdict is not None and "verdict" not in marks:
            marks["verdict"] = (time.perf_counter() - t0, sum(os.times()[:2]), hwm())

    app._display = timed
    async with app.run_test(size=(160, 50)) as pilot:
        deadline = time.monotonic() + 30
        while "verdict" not in marks and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        (t, cpu, rss), (tv, cpuv, rssv) = marks["paint"], marks["verdict"]
        now = time.perf_counter() - t0
        mods = marks["modules"]
        print("PAINTED", t_import, t, cpu, rss, tv, cpuv, rssv, now, mods, flush=True)
        app.exit()
    app.sampler.stop()
    getattr(source, "leave", source.close)()

asyncio.run(main())
os._exit(0)
"""

MODES = {"demo": ["--demo"], "live": [], "standin": []}
_standin: dict[str, str] = {}


def standin_dir() -> str:
    """A directory holding the stand-in libnvidia-ml.so.1, built once (gcc)."""
    if "dir" not in _standin:
        gcc = shutil.which("gcc") or shutil.which("cc")
        if gcc is None:
            raise SystemExit("standin mode needs gcc")
        out = Path(tempfile.mkdtemp(prefix="gputui-bench-nvml-"))
        src = ROOT / "tests" / "nvml_standin" / "standin.c"
        cmd = [gcc, "-shared", "-fPIC", "-O1", "-o", str(out / "libnvidia-ml.so.1"), str(src)]
        subprocess.run([*cmd, "-lpthread"], check=True, timeout=120)
        _standin["dir"] = str(out)
    return _standin["dir"]


def one_start(mode: str) -> dict[str, float]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    if mode == "standin":
        lib = standin_dir()
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (lib, env.get("LD_LIBRARY_PATH")) if p)
        env["GPUTUI_STANDIN_NVML"] = "ok"
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
                imp, t_in, cpu, rss, tv, cpuv, rssv, said, mods = map(float, line.split()[1:])
                p.wait(30)
                before_main = wall - said  # the interpreter's own start, before t0
                return {
                    "wall_s": before_main + t_in,
                    "verdict_wall_s": before_main + tv,
                    "import_s": imp,
                    "in_process_s": t_in,
                    "cpu_s": cpu,
                    "rss_mib": rss,
                    "verdict_in_process_s": tv,
                    "verdict_cpu_s": cpuv,
                    "verdict_rss_mib": rssv,
                    "modules": mods,
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
    try:
        res = run(a.modes, a.starts)
    finally:
        if "dir" in _standin:
            shutil.rmtree(_standin["dir"], ignore_errors=True)
    print(
        f"{'mode':8} {'import s':>9} {'first frame s':>14} {'CPU s':>7} {'RSS MiB':>8}"
        f" {'verdict s':>10} {'CPU s':>7} {'RSS MiB':>8} {'modules':>8}"
    )
    for m, r in res.items():
        print(
            f"{m:8} {r['import_s']:9.3f} {r['wall_s']:14.3f} {r['cpu_s']:7.3f} {r['rss_mib']:8.1f}"
            f" {r['verdict_wall_s']:10.3f} {r['verdict_cpu_s']:7.3f} {r['verdict_rss_mib']:8.1f}"
            f" {r['modules']:8.0f}"
        )
    write_json(a.json, "first_frame", res)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
