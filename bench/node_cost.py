"""Figure 14: gputui beside nvitop on a 4- and an 8-GPU node, idle and busy, on any machine.

The stand-in NVML (tests/nvml_standin/standin.c) plays the node: N H200s with 18 NVLinks
each, every NVLink error-counter read charged 0.8 ms of CPU as driver 580 does, and the
entry points nvitop asks for too, so both apps read the same GPUs through the same library.
For each GPU count and load, bench/app_cpu.py runs gputui, nvitop and the bare-Textual floor
side by side in 160x50 terminals at the same refresh (CPU over --duration s, peak RSS), then
starts each alone --frames times (time to the first power figure on screen).

- idle: GPUs at rest, no process on them.
- busy: every GPU computing (GPUTUI_STANDIN_NVML=busy: util, memory util, power, VRAM and
  temperature change from one sample to the next), each running one real "rank" process of
  a job (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT in its environment, rank 0 listening on the
  port as a TCPStore does), while short-lived processes come and go on the host (five
  `sleep 0.1-0.9` every 0.5 s, as scripts/device/check_nodes4.sh does on the real node).

Where it can (root, `unshare`), the whole run is in a PID namespace of its own, so the apps see
only the benchmark's processes, as on a node that runs one job (on a shared box, other
people's processes would otherwise come and go in both apps' process scans).

    python bench/node_cost.py --nvitop "/path/to/venv/bin/python -m nvitop"
    python bench/node_cost.py --gpus 4 --loads busy --duration 30 --frames 3 --json out.json
    python bench/node_cost.py --apps gputui nvitop floor \
        "gputui-old=env PYTHONPATH=/tmp/old python -m gputui"
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import app_cpu
from common import machine, machine_line, table, write_json
from health_cost import COST_US, alone, build_standin

LINKS = 18
RANK = """
import os, socket, sys, time
if os.environ["RANK"] == "0":  # the TCPStore's listening socket, as a real rank 0 holds
    s = socket.socket(); s.bind(("127.0.0.1", int(os.environ["MASTER_PORT"]))); s.listen(8)
sys.stdout.write("READY\\n"); sys.stdout.flush()
while True:
    time.sleep(0.2)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def busy_job(gpus: int) -> Iterator[list[int]]:
    """One rank process per GPU, and host processes that come and go; yields the rank pids."""
    port = _free_port()
    ranks: list[subprocess.Popen[bytes]] = []
    stop = threading.Event()

    def churn() -> None:
        kids: list[subprocess.Popen[bytes]] = []
        while not stop.wait(0.5):
            for _ in range(5):
                t = f"0.{random.randint(1, 9)}"
                kids.append(subprocess.Popen(["sleep", t], stdout=subprocess.DEVNULL))
            kids = [k for k in kids if k.poll() is None]
        for k in kids:
            k.wait()

    th = threading.Thread(target=churn, name="churn", daemon=True)
    try:
        for r in range(gpus):
            env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(gpus))
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), LOCAL_WORLD_SIZE=str(gpus))
            p = subprocess.Popen([sys.executable, "-c", RANK], env=env, stdout=subprocess.PIPE)
            ranks.append(p)
            assert p.stdout is not None
            p.stdout.readline()  # READY: rank 0 listens before the next one starts
        th.start()
        yield [p.pid for p in ranks]
    finally:
        stop.set()
        if th.is_alive():
            th.join(5)
        for p in ranks:
            p.kill()
            p.wait()


def one(lib: Path, gpus: int, load: str, apps: list[str], kw: dict[str, Any]) -> dict[str, Any]:
    """app_cpu's run of the apps on `gpus` stand-in GPUs under `load`."""
    saved = dict(os.environ)
    os.environ.update(
        LD_LIBRARY_PATH=os.pathsep.join(p for p in (str(lib), saved.get("LD_LIBRARY_PATH")) if p),
        GPUTUI_STANDIN_NVML="busy" if load == "busy" else "ok",
        GPUTUI_STANDIN_GPUS=str(gpus),
        GPUTUI_STANDIN_NVLINK=str(LINKS),
        GPUTUI_STANDIN_NVLINK_COST_US=str(COST_US),
    )
    os.environ.pop("GPUTUI_STANDIN_PIDS", None)
    try:
        with contextlib.ExitStack() as stack:
            if load == "busy":
                pids = stack.enter_context(busy_job(gpus))
                os.environ["GPUTUI_STANDIN_PIDS"] = ",".join(map(str, pids))
            return app_cpu.run(apps, source="live", **kw)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def report(results: dict[str, dict[str, Any]]) -> str:
    rows = []
    for key, res in results.items():
        by = {a["app"]: a for a in res["apps"]}
        ff = res.get("first_frame_median_s", {})
        for name, a in by.items():
            rows.append(
                (
                    key,
                    name,
                    a.get("cpu_percent"),
                    a.get("cpu_s"),
                    a.get("peak_rss_mb"),
                    ff.get(name),
                    a.get("error") or "",
                )
            )
        n = by.get("nvitop", {})
        for name, g in by.items():
            if not name.startswith("gputui") or g.get("cpu_percent") is None:
                continue
            if not n.get("cpu_percent"):
                continue
            fr = (ff.get(name) or 0) / ff["nvitop"] if ff.get(name) and ff.get("nvitop") else None
            rows.append(
                (
                    key,
                    f"{name}/nvitop",
                    g["cpu_percent"] / n["cpu_percent"],
                    None,
                    g["peak_rss_mb"] / n["peak_rss_mb"],
                    fr,
                    "targets <= 0.5, <= 1.2, <= 1.0",
                )
            )
    head = ("node", "app", "CPU % of a core", "CPU s", "peak RSS MiB", "first frame s", "")
    return table(rows, head)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--loads", nargs="+", choices=("idle", "busy"), default=["idle", "busy"])
    ap.add_argument("--apps", nargs="+", default=["gputui", "nvitop", "floor"])
    ap.add_argument("--duration", type=float, default=45.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--frames", type=int, default=5)
    ap.add_argument(
        "--interval",
        type=float,
        default=1.0,
        help="refresh of every app (s); 0: each at its default (gputui 1 s, nvitop 2 s)",
    )
    ap.add_argument("--size", default="160x50")
    ap.add_argument("--runner", choices=("auto", "tmux", "pty"), default="auto")
    ap.add_argument("--nvitop", help="nvitop command (default: nvitop on PATH)")
    ap.add_argument("--gputui", help="gputui command (default: python -m gputui)")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--shared", action="store_true", help="no PID namespace of its own")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not args.shared and not args.inside and (prefix := alone()):
        # Again, inside a PID namespace (and a /proc) of its own: see the module's docstring.
        here = sys.argv[1:] if argv is None else list(argv)
        cmd = [*prefix, sys.executable, os.path.abspath(__file__), *here, "--inside"]
        return subprocess.run(cmd, check=False).returncode
    print(machine_line(machine()), file=sys.stderr)
    kw = {
        "duration": args.duration,
        "warmup": args.warmup,
        "interval": args.interval,
        "size": args.size,
        "runner": args.runner,
        "frames": args.frames,
        "nvitop": args.nvitop,
        "gputui": args.gputui,
    }
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="gputui-node-cost-") as tmp:
        lib = build_standin(Path(tmp))
        for gpus in args.gpus:
            for load in args.loads:
                key = f"{gpus} GPUs {load}"
                print(f"== {key}", file=sys.stderr, flush=True)
                results[key] = one(lib, gpus, load, args.apps, kw)
                print(app_cpu.report(results[key]), file=sys.stderr, flush=True)
    where = "a PID namespace of its own" if args.inside else "the host's processes"
    print(
        f"{where}; stand-in NVML, {LINKS} NVLinks a GPU at {COST_US} us a counter read; refresh "
        f"{args.interval or 'each default'} s; {args.size}; CPU over {args.duration:g} s "
        f"together; first frame: median of {args.frames} starts alone; nvitop: "
        f"{shlex.quote(args.nvitop or 'nvitop')}"
    )
    print(report(results))
    write_json(args.json, "node_cost", {"args": vars(args), "runs": results})
    ok = all(
        a.get("error") is None and not r["first_frame_errors"]
        for r in results.values()
        for a in r["apps"]
    )
    if not ok:
        print("some runs failed (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
