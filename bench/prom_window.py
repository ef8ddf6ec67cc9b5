"""`check --prometheus` over a cluster's window beside a plain HTTP client fetching the same.

The issue's target: a window of 32 nodes x 8 GPUs x 2 h at 15 s (481 steps, 256 GPUs) within
3x of fetching the same ranges with a plain HTTP client, plus 3 s. Measured side by side in
one run, against one real Prometheus holding the window (backfilled once with promtool from
dcgm-exporter-style OpenMetrics: 8 series per GPU, four 64-GPU jobs, one of which hangs
with one GPU idle while its 63 peers spin):

- `plain`: urllib, one query after the other, every query gputui sends (the same
  selectors, the same 10,000-step chunks), each answer read and `json.loads`-ed: the floor
  of getting these numbers into Python at all;
- `gputui`: the whole `gputui check --prometheus ... --json` as a subprocess (start-up,
  fetch, columns, the detector, the output), and in-process the fetch + columns
  (`read_history`) and the judgement (`judge_window`) apart.

    python bench/prom_window.py --nodes 32 --gpus 8 --hours 2 --repeat 3 [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from common import machine, machine_line, median, write_json  # noqa: E402
from prom_history import SPIN, STUCK, TRAIN, Gpu, HistoryServer, grid, write_openmetrics  # noqa: E402

from gputui.collect.prom.client import chunks, open_server  # noqa: E402
from gputui.collect.prom.fetch import queries, read_history  # noqa: E402
from gputui.collect.prom.names import DCGM  # noqa: E402
from gputui.diagnose.history.window import judge_window  # noqa: E402

STEP = 15.0


def cluster(nodes: int, per_node: int, t0: float, hours: float) -> list[Gpu]:
    """Jobs of 8 nodes each; the first hangs at a third of the window (node 3's GPU 5 idle)."""
    hang_at = t0 + hours * 3600 / 3
    out = []
    for n in range(nodes):
        host = f"gpu-{n:03d}"
        job = n // 8
        for i in range(per_node):

            def read(t: float, n: int = n, i: int = i, job: int = job) -> dict[str, float]:
                if job != 0 or t < hang_at:
                    return TRAIN
                return STUCK if (n, i) == (3, 5) else SPIN

            pod = f"job{job}-worker-{n % 8}"
            out.append(Gpu(host, i, pod, "ml", read))
    return out


def plain_fetch(url: str, qs: list[str], start: float, end: float) -> tuple[float, int]:
    """Seconds and bytes: every query and chunk, one after the other, read and parsed."""
    began, size = time.perf_counter(), 0
    for q in qs:
        for a, b in chunks(start, end, STEP):
            form = {"query": q, "start": f"{a:.3f}", "end": f"{b:.3f}", "step": f"{STEP:g}"}
            req = urllib.request.Request(
                url + "/api/v1/query_range", data=urllib.parse.urlencode(form).encode()
            )
            with urllib.request.urlopen(req, timeout=120) as r:
                body = r.read()
            size += len(body)
            json.loads(body)
    return time.perf_counter() - began, size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", default=None, help="a directory to keep (and reuse) the TSDB in")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    t0 = (time.time() // 3600) * 3600 - 6 * 3600
    t1 = t0 + args.hours * 3600
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="prom-window-"))
    tmp.mkdir(parents=True, exist_ok=True)
    stamp = tmp / "window.json"
    if stamp.exists() and json.loads(stamp.read_text())["shape"] == [
        args.nodes,
        args.gpus,
        args.hours,
    ]:
        t0, t1 = json.loads(stamp.read_text())["window"]
        om = None
    else:
        om = tmp / "dcgm.om"
        began = time.perf_counter()
        n = write_openmetrics(
            om, cluster(args.nodes, args.gpus, t0, args.hours), grid(t0, t1, STEP)
        )
        print(f"wrote {n} samples in {time.perf_counter() - began:.1f} s", file=sys.stderr)
    began = time.perf_counter()
    server = HistoryServer(tmp, om)
    if om is not None:
        stamp.write_text(
            json.dumps({"shape": [args.nodes, args.gpus, args.hours], "window": [t0, t1]})
        )
        om.unlink()
    print(f"prometheus ready in {time.perf_counter() - began:.1f} s", file=sys.stderr)
    try:
        qs = list(queries(DCGM, None, ()).values())
        plain, whole, fetch, judge = [], [], [], []
        size = 0
        code = None
        for _ in range(args.repeat):
            s, size = plain_fetch(server.url, qs, t0, t1)
            plain.append(s)
            began = time.perf_counter()
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "gputui",
                    "check",
                    "--prometheus",
                    server.url,
                    "--from",
                    str(t0),
                    "--to",
                    str(t1),
                    "--json",
                ],
                capture_output=True,
                text=True,
                timeout=600,
                cwd=ROOT,
            )
            whole.append(time.perf_counter() - began)
            code = r.returncode
            summary = json.loads(r.stdout.splitlines()[-1])
            began = time.perf_counter()
            hist = read_history(open_server(server.url), t0, t1, STEP)
            fetch.append(time.perf_counter() - began)
            began = time.perf_counter()
            judge_window(hist)
            judge.append(time.perf_counter() - began)
    finally:
        server.stop()
    target = 3 * median(plain) + 3
    result = {
        "gpus": args.nodes * args.gpus,
        "steps": int((t1 - t0) // STEP) + 1,
        "queries": len(qs),
        "answer_mb": round(size / 1e6, 1),
        "plain_fetch_s": round(median(plain), 2),
        "check_s": round(median(whole), 2),
        "read_history_s": round(median(fetch), 2),
        "judge_window_s": round(median(judge), 2),
        "target_s": round(target, 2),
        "within_target": median(whole) <= target,
        "exit": code,
        "hung": [j["job"] for j in summary["jobs"] if j["state"] == "hung"],
        "suspects": [
            (s["host"], s["gpu"], s.get("pod")) for j in summary["jobs"] for s in j["suspects"]
        ],
    }
    print(machine_line(machine()))
    for k, v in result.items():
        print(f"{k:>16}: {v}")
    write_json(args.json, "prom_window", result)
    return 0 if result["within_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
