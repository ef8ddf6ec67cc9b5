"""A day-long recording, and what `snapshot`, `check --replay` and the dashboard pay for it.

Issue 34: `snapshot` of a 200,000-sample recording (20 MB) took 13.3 s on the 2-core CPU box,
over 20 s under load; `check --replay` and the dashboard's replay read the whole file the
same way. This script makes such a recording and times each face on it:

    python bench/day_recording.py                      # make it (once) and time everything
    python bench/day_recording.py --gpus 8 --samples 25000 --repeat 3 --json out.json
    python bench/day_recording.py --before 86c70cf     # check --replay before issue 34's end

The recording (8 GPUs x 25,000 samples = 200,000 GPU lines, 1 s apart, about 7 hours) is
written by gputui's own TraceWriter from the shapes of the real recordings in tests/data:
each GPU's readings cycle through the H200 calibration trace's training, communication and
spin phases (tests/data/h200x2-trace.jsonl.gz), each GPU holds one rank whose process is
the one of tests/data/h200x2-die-unseen.trace.jsonl.gz (its command line, user, rank
variables), a `health` record every 10 minutes, and the last 10 minutes are a hang: every
GPU spins but GPU 3, whose rank is stuck on the CPU, with a `stacks` record at the stall.

What is timed, each in a fresh `python -m gputui` (start-up included):

- `snapshot --replay F` (the end) and `snapshot --replay F --at S` (the middle);
- `check --replay F`: the whole file replayed (samples/s: GPU lines per second, as the
  issue counts them), wall and CPU seconds (the child's user + system), and the rate once
  the start-up is taken off (a `check --replay` of a one-sample file of the same shape);
  `--before REV` times it with the code of git revision REV too, on the same file;
- the dashboard's replay start: the time to its first frame (bench/first_frame.py's child).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, machine, machine_line, median, table, write_json  # noqa: E402
from health_cost import extract  # noqa: E402  (gputui at a revision: `python -m gputui` there)

DATA = ROOT / "tests" / "data"
T0 = 1_795_400_000.0
HANG_S = 600  # the last ten minutes
STUCK_GPU = 3


def _phases() -> dict[str, list[dict[str, Any]]]:
    """The calibration trace's GPU-0 readings by phase."""
    out: dict[str, list[dict[str, Any]]] = {}
    with gzip.open(DATA / "h200x2-trace.jsonl.gz", "rt") as f:
        for line in f:
            d = json.loads(line)
            if d.get("gpu") == 0:
                out.setdefault(d.get("phase") or "idle", []).append(d)
    return out


def make(path: Path, gpus: int, samples: int) -> None:
    import random

    from gputui.collect.model import GpuSample, RankInfo, Snapshot
    from gputui.collect.trace.format import TraceWriter
    from gputui.collect.trace.read import read_trace

    rnd = random.Random(34)  # readings jitter as NVML's and psutil's do: the file's entropy
    phases = _phases()
    train, comm, idle = phases["train"], phases["comm_heavy"], phases["idle"]
    spin = [  # the calibration's spinning GPU: a kernel at full util, no memory traffic
        d for d in phases["stall_in_loop"]
        if d["util"] >= 90 and d["mem_util"] <= 1 and d["power_w"] <= 150
    ]  # fmt: skip
    template = next(p for s in read_trace(DATA / "h200x2-die-unseen.trace.jsonl.gz")
                    for p in s.processes if p.rank is not None)  # fmt: skip
    procs = []
    for g in range(gpus):
        rank = RankInfo(rank=g, world_size=gpus, local_rank=g, local_world_size=gpus,
                        master="10.0.0.7:29500")  # fmt: skip
        procs.append(replace(template, pid=4000 + g, gpus=(g,), rank=rank, ppid=3999))
    w = TraceWriter(path, host="node-07", interval=1.0)
    hang_from = samples - HANG_S
    for i in range(samples):
        t = T0 + i
        hung = i >= hang_from
        gs, ps = [], []
        for g in range(gpus):
            if hung:
                src = idle if g == STUCK_GPU else spin
            else:
                src = train if (i // 300) % 3 else comm  # 5-minute blocks
            r = src[(i + 7 * g) % len(src)]
            gs.append(
                GpuSample(
                    index=g,
                    name="NVIDIA H200",
                    uuid=f"GPU-549afb26-e13b-c2a8-a9b1-fd78b6f547{g:02d}",
                    util=float(r["util"]),
                    mem_util=float(r["mem_util"]),
                    power_w=round(float(r["power_w"]) * rnd.uniform(0.97, 1.03), 3),
                    power_limit_w=700.0,
                    mem_used_mb=float(r["mem_used_mb"]) + 40_000 + rnd.randrange(64),
                    mem_total_mb=143_771.0,
                    temp_c=r.get("temp"),
                    sm_mhz=r.get("sm_mhz"),
                    mem_mhz=3201,
                    pstate=0,
                    events=0,
                    pids=(4000 + g,),
                    proc_mem_mb=((4000 + g, 40_000.0),),
                )
            )
            ps.append(replace(procs[g], cpu_percent=round(rnd.uniform(95, 105), 1),
                              rss_mb=round(9000 + rnd.uniform(0, 50), 4),
                              gpu_mem_mb=40_000.0))  # fmt: skip
        w.write(Snapshot(t=t, gpus=tuple(gs), processes=tuple(ps), source="nvml"))
        if i % 600 == 0:
            w.write_record({"type": "health", "t": round(t, 3), "started": T0,
                            "counters": {str(g): {"lost": False, "ecc_uncorrected_volatile": 0}
                                         for g in range(gpus)}})  # fmt: skip
        if i == hang_from + 12:
            ranks = [
                {"pid": 4000 + g, "rank": g, "gpu": g, "outcome": "done", "thread": "active",
                 "frames": [["load_next_batch", "train.py", 192], ["main", "train.py", 303]]
                 if g == STUCK_GPU else
                 [["all_reduce", "torch/distributed/distributed_c10d.py", 2501],
                  ["train_step", "train.py", 178], ["main", "train.py", 303]]}
                for g in range(gpus)
            ]  # fmt: skip
            w.write_record({"type": "stacks", "t": round(t, 3), "job": "master:10.0.0.7:29500",
                            "trigger": "stalled", "tool": "py-spy", "ranks": ranks})  # fmt: skip
    w.close()


def _run(
    argv: list[str], cwd: Path = ROOT
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall s, CPU s of the child: user + system, start-up included, the result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=cwd)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r


FIRST_FRAME = r"""
import sys, time, asyncio
t0 = float(sys.argv[2])
from gputui.collect.source import ReplaySource
from gputui.ui.app import GputuiApp
try:
    src = ReplaySource.from_file(sys.argv[1], realtime=True, lazy=True)
except TypeError:  # before issue 34: no lazy reading
    src = ReplaySource.from_file(sys.argv[1], realtime=True)
app = GputuiApp(src, first=src.sample())
async def main():
    async with app.run_test(size=(120, 40)) as pilot:
        while app.snapshot is None:
            await pilot.pause(0.01)
        print(time.time() - t0)
asyncio.run(main())
"""


def _time(argv: list[str], repeat: int, cwd: Path = ROOT) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu, r = _run(argv, cwd)
        if r.returncode not in (0, 1):
            raise SystemExit(f"{argv[3:]}: exit {r.returncode}: {r.stderr[-500:]}")
        walls.append(wall)
        cpus.append(cpu)
    return walls, cpus


def run(
    path: Path, repeat: int, gpus: int, samples: int, before: str | None = None
) -> dict[str, Any]:
    py = [sys.executable, "-m", "gputui"]
    one = path.with_name(f"gputui-day-{gpus}x1.jsonl.gz")  # start-up: the same, one sample
    if not one.exists():
        make(one, gpus, 1)
    cases = {
        "snapshot (end)": ([*py, "snapshot", "--replay", str(path)], 0),
        "snapshot --at middle": (
            [*py, "snapshot", "--replay", str(path), "--at", str(samples // 2)],
            0,
        ),
        "check --replay: start-up (1 sample)": ([*py, "check", "--replay", str(one)], gpus),
        "check --replay": ([*py, "check", "--replay", str(path)], gpus * samples),
    }
    rows, out = [], {}
    with tempfile.TemporaryDirectory(prefix="gputui-before-") as tmp:
        trees = {"": ROOT}
        if before:
            trees[f" (before: {before})"] = extract(before, Path(tmp))
        for label, cwd in trees.items():
            start_cpu = start_wall = 0.0
            for name, (argv, lines) in cases.items():
                if label and not name.startswith("check"):
                    continue
                walls, cpus = _time(argv, repeat, cwd)
                wall, cpu = median(walls), median(cpus)
                if name.endswith("(1 sample)"):  # the start-up itself: no rates
                    start_wall, start_cpu = wall, cpu
                    rate = net = cpu_rate = cpu_net = None
                else:
                    rate = lines / wall if lines else None
                    net = lines / max(wall - start_wall, 1e-9) if lines else None
                    cpu_rate = lines / cpu if lines and cpu else None
                    cpu_net = lines / max(cpu - start_cpu, 1e-9) if lines else None
                rows.append((name + label, wall, max(walls), cpu, rate, net))
                out[name + label] = {
                    "median_s": wall, "max_s": max(walls), "median_cpu_s": cpu,
                    "lines_per_s": rate, "lines_per_s_after_startup": net,
                    "lines_per_cpu_s": cpu_rate, "lines_per_cpu_s_after_startup": cpu_net,
                }  # fmt: skip
    times = []
    for _ in range(repeat):
        _w, _c, r = _run([sys.executable, "-c", FIRST_FRAME, str(path), str(time.time())])
        if r.returncode != 0:
            raise SystemExit(f"first frame: {r.stderr[-500:]}")
        times.append(float(r.stdout.strip().splitlines()[-1]))
    rows.append(("dashboard replay: first frame", median(times), max(times), None, None, None))
    out["dashboard first frame"] = {"median_s": median(times), "max_s": max(times)}
    heads = ["case", "median s", "max s", "CPU s", "GPU lines/s", "lines/s after start-up"]
    print(table(rows, heads))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--samples", type=int, default=25_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--file", default=None, help="where the recording is (made if missing)")
    ap.add_argument("--json", default=None, metavar="PATH")
    ap.add_argument("--before", default=None, metavar="REV", help="also time check at REV")
    args = ap.parse_args()
    path = Path(args.file or f"/tmp/gputui-day-{args.gpus}x{args.samples}.jsonl.gz")
    print(machine_line(machine()), f"load {os.getloadavg()[0]:.1f}")
    if not path.exists():
        t = time.perf_counter()
        make(path, args.gpus, args.samples)
        print(f"made {path} in {time.perf_counter() - t:.0f} s")
    print(f"{path}: {path.stat().st_size / 2**20:.1f} MiB, {args.gpus * args.samples} GPU lines")
    res = run(path, args.repeat, args.gpus, args.samples, args.before)
    res["file_mib"] = path.stat().st_size / 2**20
    write_json(args.json, "day_recording", res)


if __name__ == "__main__":
    main()
