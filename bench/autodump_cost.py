"""What an auto-dump costs: py-spy's pause per rank, and the whole dump of 2, 4 and 8 ranks.

When a job stalls, gputui's Watcher runs py-spy on every local rank of it (the stacks
gatherer, `gputui.watch.watcher.gather_stacks`: `dump_all` in parallel, parse, group, build the
record). Two costs matter to the person who leaves auto-dump on:

- the pause each rank sees: py-spy stops the process while it reads its memory. Each target
  here runs a loop that wakes every 1 ms and keeps the longest gap between two wake-ups; the
  longest gap while a dump runs, against the same window without a dump, is the pause the
  rank felt (on a busy 2-core box the baseline jitter is part of the figure: both are shown);
- the wall time: one `py-spy dump --pid` subprocess per rank, and the whole gatherer for
  2, 4 and 8 ranks (what delays the culprit's frame after the stall transition).

    python bench/autodump_cost.py --ranks 2 4 8 --repeat 7 [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from common import machine, machine_line, median, table, write_json

WORKER = r"""
import os, sys, threading, time
worst = 0.0
lock = threading.Lock()
def control():
    global worst
    for line in sys.stdin:
        with lock:
            if line.startswith("report"):
                print(f"{worst * 1e3:.3f}", flush=True)
            worst = 0.0
def wait_in_collective():
    global worst
    last = time.perf_counter()
    while True:
        time.sleep(0.001)
        now = time.perf_counter()
        with lock:
            worst = max(worst, now - last)
        last = now
def step(rank):
    if rank == 1:
        load_next_batch_stuck()
    wait_in_collective()
def load_next_batch_stuck():
    wait_in_collective()
threading.Thread(target=control, daemon=True).start()
print("READY", flush=True)
step(int(os.environ["RANK"]))
"""


def spawn(n: int) -> list[subprocess.Popen[str]]:
    procs = []
    for r in range(n):
        env = {**os.environ, "RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_RANK": str(r)}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    for p in procs:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "READY":
            raise RuntimeError(f"worker {p.pid} did not start")
    return procs


def reset(procs: Sequence[subprocess.Popen[str]]) -> None:
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("reset\n")
        p.stdin.flush()


def worst_gaps_ms(procs: Sequence[subprocess.Popen[str]]) -> list[float]:
    out = []
    for p in procs:
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write("report\n")
        p.stdin.flush()
        out.append(float(p.stdout.readline()))
    return out


def target(procs: Sequence[subprocess.Popen[str]]) -> Any:
    """The JobTarget the Watcher would build at a stall transition of these ranks."""
    import psutil

    from gputui.collect.model import ProcessInfo, RankInfo
    from gputui.diagnose.verdict import Verdict
    from gputui.watch.watcher import JobTarget

    ranks = tuple(
        ProcessInfo(
            pid=p.pid,
            create_time=psutil.Process(p.pid).create_time(),
            gpus=(r,),
            rank=RankInfo(rank=r, world_size=len(procs)),
        )
        for r, p in enumerate(procs)
    )
    v = Verdict(t=time.time(), state="stalled", spinning=(0,), suspects=(1,))
    return JobTarget("bench", "bench", "stalled", v, ranks)


def one_py_spy_ms(exe: str, pid: int) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([exe, "dump", "--pid", str(pid)], capture_output=True, check=False)
    wall = (time.perf_counter() - t0) * 1e3
    if r.returncode != 0:
        raise RuntimeError(f"py-spy failed on {pid}: {r.stderr.decode()[-200:]}")
    return wall


def run(ranks: Sequence[int] = (2, 4, 8), repeat: int = 7) -> dict[str, Any]:
    import threading

    from gputui.tools.which import find_tool
    from gputui.watch.watcher import gather_stacks

    exe = find_tool("py-spy")
    if exe is None:
        return {"skipped": "py-spy not found (pip install py-spy)"}
    rows = []
    for n in ranks:
        procs = spawn(n)
        try:
            job = target(procs)
            single, whole, pause, base, ok = [], [], [], [], True
            for _ in range(repeat):
                reset(procs)
                single.append(one_py_spy_ms(exe, procs[0].pid))
                reset(procs)
                t0 = time.perf_counter()
                rec = gather_stacks(job, threading.Event())
                wall = time.perf_counter() - t0
                whole.append(wall * 1e3)
                pause.append(max(worst_gaps_ms(procs)))
                ok = ok and rec is not None and all(r["outcome"] == "done" for r in rec["ranks"])
                reset(procs)  # the same window without a dump: the box's own jitter
                time.sleep(wall)
                base.append(max(worst_gaps_ms(procs)))
            rows.append(
                {
                    "ranks": n,
                    "py_spy_one_rank_ms": median(single),
                    "autodump_all_ranks_ms": median(whole),
                    "longest_gap_during_dump_ms": median(pause),
                    "longest_gap_without_dump_ms": median(base),
                    "all_done": ok,
                }
            )
        finally:
            for p in procs:
                p.kill()
            for p in procs:
                p.wait()
    return {"py_spy": exe, "repeat": repeat, "rows": rows}


def report(res: dict[str, Any]) -> str:
    if "skipped" in res:
        return f"auto-dump cost: skipped ({res['skipped']})"
    rows = [
        (
            r["ranks"],
            r["py_spy_one_rank_ms"],
            r["autodump_all_ranks_ms"],
            r["longest_gap_during_dump_ms"],
            r["longest_gap_without_dump_ms"],
            "yes" if r["all_done"] else "NO",
        )
        for r in res["rows"]
    ]
    head = (
        "ranks",
        "py-spy 1 rank ms",
        "auto-dump all ms",
        "rank's longest gap ms (dump)",
        "(no dump)",
        "all done",
    )
    return table(rows, head) + f"\nmedian of {res['repeat']} rounds each"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    print(machine_line(machine()), file=sys.stderr)
    res = run(args.ranks, args.repeat)
    print(report(res))
    write_json(args.json, "autodump_cost", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
