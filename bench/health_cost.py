"""Figure 13: the CPU a minute that reading GPU health costs, at 4 and 8 GPUs x 18 NVLinks.

The stand-in NVML (tests/nvml_standin/standin.c) charges 0.8 ms of CPU time for each NVLink
(counter, link) read, as driver 580 does on an H200, and microseconds for everything else.
For each GPU count, four `gputui check --json --interval 1` processes run side by side for
`--span` seconds (the load of the machine falls on all alike; each one's CPU time comes from
wait4, its threads included):

- after: this checkout, every GPU with 18 links up;
- after, no NVLink: this checkout, the same node without NVLink (the floor);
- before / before, no NVLink: the same two with gputui as of `--before` (default 48ea36a,
  the last revision that read every link's counters every 5 s on the sampling thread),
  extracted with `git archive`.

The health reading's CPU a minute is each run's CPU less its floor's, scaled to a minute.

    python bench/health_cost.py                    # 4 and 8 GPUs, 60 s each (about 2 min)
    python bench/health_cost.py --gpus 8 --span 30 --json out/health_cost.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from common import ROOT, machine, machine_line, table, write_json

STANDIN = ROOT / "tests" / "nvml_standin" / "standin.c"
BEFORE = "48ea36a"
COST_US = 800


def build_standin(into: Path) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        sys.exit("health_cost: needs gcc to build the stand-in NVML")
    lib = into / "libnvidia-ml.so.1"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(STANDIN), "-lpthread"],
        check=True,
        timeout=120,
    )
    return into


def extract(rev: str, into: Path) -> Path:
    """gputui as of `rev` (its package only), to run beside this checkout."""
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "gputui"],
        check=True,
        capture_output=True,
        timeout=60,
    ).stdout
    into.mkdir(parents=True, exist_ok=True)
    tar = into / "src.tar"
    tar.write_bytes(data)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    return into


def alone() -> list[str]:
    """A PID namespace of its own where that works (root): no other job on its host."""
    argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
    if os.geteuid() == 0 and shutil.which("unshare"):
        r = subprocess.run([*argv, "true"], capture_output=True, timeout=10)
        if r.returncode == 0:
            return argv
    return []


def start(
    src: Path, lib: Path, gpus: int, links: int, span: float, pass_s: float = 60.0
) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        # The pass this figure is about: a minute (the default is 5 minutes since; see
        # gputui.collect.nvml.nvlink), so each GPU is read within a run. 48ea36a ignores it.
        GPUTUI_NVLINK_PASS_S=f"{pass_s:g}",
        LD_LIBRARY_PATH=str(lib),
        PYTHONPATH=str(src),
        GPUTUI_STANDIN_NVML="ok",
        GPUTUI_STANDIN_GPUS=str(gpus),
        GPUTUI_STANDIN_NVLINK=str(links),
        GPUTUI_STANDIN_NVLINK_COST_US=str(COST_US),
    )
    argv = [*alone(), sys.executable, "-m", "gputui", "check", "--json", "--interval", "1"]
    argv += ["--duration", f"{span:g}"]
    return subprocess.Popen(
        argv, cwd=src, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def cpu_of(p: subprocess.Popen[bytes]) -> float:
    _, _status, usage = os.wait4(p.pid, 0)
    p.returncode = 0
    return usage.ru_utime + usage.ru_stime


def measure(gpus: list[int], span: float, before: str) -> dict[str, Any]:
    out: dict[str, Any] = {"span_s": span, "cost_us": COST_US, "before": before, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="gputui-health-cost-") as tmp:
        lib = build_standin(Path(tmp))
        old = extract(before, Path(tmp) / "before")
        for n in gpus:
            procs = {
                "after": start(ROOT, lib, n, 18, span),
                "after_floor": start(ROOT, lib, n, 0, span),
                "before": start(old, lib, n, 18, span),
                "before_floor": start(old, lib, n, 0, span),
            }
            cpu = {k: cpu_of(p) for k, p in procs.items()}
            per_min = 60.0 / span
            out["runs"][str(n)] = {
                "cpu_s": {k: round(v, 3) for k, v in cpu.items()},
                "after_ms_per_min": round((cpu["after"] - cpu["after_floor"]) * per_min * 1e3),
                "before_ms_per_min": round((cpu["before"] - cpu["before_floor"]) * per_min * 1e3),
            }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--span", type=float, default=60.0, help="seconds each run lasts")
    ap.add_argument("--before", default=BEFORE, help="the revision to compare with")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    res = measure(args.gpus, args.span, args.before)
    rows = []
    for n, r in res["runs"].items():
        model = int(n) * 18 * 4 * COST_US / 1e3  # ms of one pass over every link
        rows.append(
            [
                f"{n} GPUs x 18 links",
                f"{r['before_ms_per_min']} ms/min ({r['before_ms_per_min'] / 600:.1f} %)",
                f"{r['after_ms_per_min']} ms/min ({r['after_ms_per_min'] / 600:.1f} %)",
                f"{model * 12:.0f} / {model:.0f}",
            ]
        )
    print(machine_line(machine()))
    print(f"health reading's CPU a minute (share of a core), {res['span_s']:g} s runs:")
    print(table(rows, ["node", "before (every 5 s)", "after (a pass a minute)", "model ms/min"]))
    write_json(str(args.json) if args.json else None, "health_cost", res)
    return res


if __name__ == "__main__":
    main()
