"""`gputui merge` over many node reports: wall time and peak memory.

1,024 nodes of 8 GPUs each (8,192 ranks) report as `gputui check --json` does: an "ok" line
when the job runs, then a "stalled" line a few seconds into the hang, with a stack entry per
rank (issue 9's auto-dump). One rank (on node-0017) is stuck on the CPU: its node reports
that GPU as the suspect and its stack elsewhere. Nodes see the stall at slightly different
times (jitter up to 1 s), as real nodes do. Goal: under 1 s and 200 MB for the whole command.

    python bench/merge_cost.py --nodes 1024 --gpus 8 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import machine, machine_line, median, write_json  # noqa: E402

STUCK_NODE, STUCK_GPU = 17, 6


def reports(nodes: int, gpus: int, seed: int = 1) -> list[dict]:
    rnd = random.Random(seed)
    world = nodes * gpus
    out = []
    for n in range(nodes):
        host = f"node-{n:04d}"
        ranks = {str(g): n * gpus + g for g in range(gpus)}
        base = {"host": host, "job_key": "torchelastic:run-1", "world_size": world}
        out.append(
            {
                "t": 1000.0 + rnd.random(),
                "state": "ok",
                "spinning": [],
                "suspects": [],
                "reason": "no hang",
                "suspect_pids": [],
                "since": None,
                "job": None,
                "next_steps": [],
                **base,
                "ranks": ranks,
            }
        )
        stuck = n == STUCK_NODE
        spinning = [g for g in range(gpus) if not (stuck and g == STUCK_GPU)]
        suspects = [STUCK_GPU] if stuck else []
        stacks = [
            {
                "pid": 10_000 + g,
                "rank": n * gpus + g,
                "gpu": g,
                "role": "suspect" if g in suspects else "waiting",
                "outcome": "done",
                "frame": "load_batch (data.py:88)" if g in suspects else "train_step (train.py:44)",
                "collective": None if g in suspects else "all_reduce",
                "stack": ["load_batch (data.py:88)"]
                if g in suspects
                else ["all_reduce (distributed_c10d.py:2501)", "train_step (train.py:44)"],
                "error": None,
            }
            for g in range(gpus)
        ]
        t = 1012.0 + rnd.random()
        out.append(
            {
                "t": t,
                "state": "stalled",
                "spinning": spinning,
                "suspects": suspects,
                "reason": "stalled",
                "suspect_pids": [10_000 + g for g in suspects],
                "since": t - 10,
                "job": "run-1",
                "next_steps": [],
                **base,
                "ranks": ranks,
                "stacks": stacks,
            }
        )
    rnd.shuffle(out)  # arrival order of a pipe from many nodes
    return out


def run_once(path: str) -> tuple[float, float, dict]:
    """Wall seconds and peak RSS (MB) of `gputui merge --json PATH`, and its last line."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "merge", "--json", path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    last = json.loads(out.splitlines()[-1])
    return wall, usage.ru_maxrss / 1024, last


def in_process(path: str) -> float:
    """Reading, parsing and merging only (no interpreter start-up)."""
    from gputui.commands.merge import merge_inputs

    start = time.perf_counter()
    steps = merge_inputs([path], None, 2.0)
    took = time.perf_counter() - start
    assert steps[-1].suspects == (f"node-{STUCK_NODE:04d}:{STUCK_GPU}",)
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args()
    m = machine()
    print(machine_line(m))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "reports.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for r in reports(args.nodes, args.gpus):
                f.write(json.dumps(r) + "\n")
        size_mb = os.path.getsize(path) / 2**20
        walls, rss, inproc = [], [], []
        for _ in range(args.repeat):
            wall, peak, last = run_once(path)
            walls.append(wall)
            rss.append(peak)
            inproc.append(in_process(path))
        # the work measured was real: the merged verdict names the stuck rank and its node
        assert last["suspects"] == [f"node-{STUCK_NODE:04d}:{STUCK_GPU}"], last["suspects"]
        assert last["suspect_ranks"] == [STUCK_NODE * args.gpus + STUCK_GPU]
        groups = last.get("stack_groups")
    res = {
        "nodes": args.nodes,
        "gpus_per_node": args.gpus,
        "input_mb": round(size_mb, 1),
        "command_wall_s_median": round(median(walls), 3),
        "command_wall_s_max": round(max(walls), 3),
        "merge_in_process_s_median": round(median(inproc), 3),
        "peak_rss_mb_max": round(max(rss), 1),
        "stack_groups": groups,
    }
    print(f"input: {args.nodes} nodes x {args.gpus} GPUs, 2 lines per node, {size_mb:.1f} MB")
    print(
        f"gputui merge --json (whole command): median {res['command_wall_s_median']} s, "
        f"max {res['command_wall_s_max']} s (goal < 1 s)"
    )
    print(f"read + parse + merge in process: median {res['merge_in_process_s_median']} s")
    print(f"peak RSS: {res['peak_rss_mb_max']} MB (goal < 200 MB)")
    print("stack groups:", "; ".join(groups or []))
    write_json(args.json, "merge_cost", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
