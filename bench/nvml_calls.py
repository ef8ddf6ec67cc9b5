"""The NVML calls a live source makes per GPU per second at rest, this checkout beside another.

Each NVML call is a trip into the driver: on a GPU node the NVML thread is the dashboard's
second cost at rest after the UI thread, and the stand-in cannot charge what the driver
does, so the figure that carries over to the node is the count. `gputui record` (the same
live source and health monitor as the dashboard, at its 1 s refresh) runs against the
stand-in NVML (tests/nvml_standin/standin.c) playing N idle H200s with 18 NVLinks each,
while the stand-in logs every entry point; both revisions run at the same time.

    python bench/nvml_calls.py --gpus 4 --seconds 60 --before da2896a --json out.json
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import ROOT, machine, machine_line, table, write_json
from health_cost import build_standin, extract


def start(tree: Path, lib: Path, gpus: int, seconds: float, work: Path, name: str) -> Any:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(tree),
        LD_LIBRARY_PATH=str(lib),
        GPUTUI_STANDIN_NVML="ok",
        GPUTUI_STANDIN_GPUS=str(gpus),
        GPUTUI_STANDIN_NVLINK="18",
        GPUTUI_STANDIN_NVLINK_COST_US="0",  # the count is measured, not the counters' cost
        GPUTUI_STANDIN_LOG=str(work / f"{name}.log"),
    )
    argv = [sys.executable, "-m", "gputui", "record", "--interval", "1"]
    argv += ["--duration", str(seconds), str(work / f"{name}.jsonl")]
    # cwd outside both trees: `-m` puts the cwd first on sys.path
    return subprocess.Popen(argv, env=env, cwd=work, stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--before", default="da2896a", help="the revision to compare with")
    ap.add_argument("--json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gputui-nvml-calls-") as tmp:
        work = Path(tmp)
        lib = build_standin(work)
        trees = {"before": extract(a.before, work / "before"), "this": ROOT}
        procs = {n: start(t, lib, a.gpus, a.seconds, work, n) for n, t in trees.items()}
        for p in procs.values():
            p.wait(timeout=a.seconds + 120)
        counts = {n: collections.Counter((work / f"{n}.log").read_text().split()) for n in trees}
    per = a.gpus * a.seconds
    names = sorted(set().union(*counts.values()), key=lambda k: -counts["before"][k])
    rows = [
        (k, round(counts["before"][k] / per, 2), round(counts["this"][k] / per, 2))
        for k in names
        if k.startswith("nvmlDevice") and (counts["before"][k] + counts["this"][k]) / per >= 0.05
    ]
    total = {
        n: round(sum(v for k, v in c.items() if k.startswith("nvmlDevice")) / per, 2)
        for n, c in counts.items()
    }
    print(machine_line(machine()))
    print(f"NVML device calls per GPU per second, {a.gpus} idle stand-in H200s, {a.seconds:g} s")
    print(
        table(
            [*rows, ("all nvmlDevice* calls", total["before"], total["this"])],
            ["entry point", f"before ({a.before})", "this checkout"],
        )
    )
    write_json(
        a.json,
        "nvml_calls",
        {
            "gpus": a.gpus,
            "seconds": a.seconds,
            "before": a.before,
            "per_gpu_s": rows,
            "total": total,
        },
    )


if __name__ == "__main__":
    main()
