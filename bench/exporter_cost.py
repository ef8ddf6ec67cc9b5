"""What `gputui exporter` costs: CPU % and RSS while scraped every second, beside the bare sampler.

Three processes run side by side for the same window (so a noisy neighbour hits all alike):

- `exporter`: `gputui exporter`, scraped over HTTP every second as Prometheus would;
- `sampler+detector`: the same Source, Sampler and detector/View work, no HTTP;
- `bare sampler`: the same Source and Sampler only, snapshots dropped.

The difference between the first two is the price of serving; between the last two, of
the detector. CPU % is (user + system CPU seconds) / wall seconds over the window, after a
warm-up; RSS is read every second (the last and the largest are given).

CPU box (default): the bundled demo replay (4 samples a second, as recorded; a live
exporter samples once a second) looping. GPU node: `--live` samples NVML every second;
`--compare-cmd`/`--compare-url` add another exporter (e.g. nvitop-exporter) to the table.

    python bench/exporter_cost.py --duration 60
    python bench/exporter_cost.py --live --compare-cmd "nvitop-exporter ..." \\
        --compare-url http://127.0.0.1:PORT/metrics
"""

from __future__ import annotations

import argparse
import os
import select
import shlex
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402
from common import machine, machine_line, median, pct, table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WARMUP_S = 5.0


# ---------------------------------------------------------------- the in-process baselines


def _baseline(mode: str, live: bool) -> int:
    """Run a Source + Sampler (and, for 'detector', the exporter's Watch) until killed."""
    from gputui.collect.live import LiveSource
    from gputui.collect.sampler import Sampler
    from gputui.collect.source import ReplaySource
    from gputui.diagnose.hang.detector import Detector
    from gputui.exporter.looping import LoopingSource
    from gputui.exporter.view import Watch

    source: Any = LiveSource(interval=1.0) if live else LoopingSource(ReplaySource.demo())
    if mode == "detector":
        consume = Watch(Detector(), host="bench").on_snapshot
    else:

        def consume(snap: Any) -> None:
            pass

    Sampler(source, consume).start()
    print("ready", flush=True)
    threading.Event().wait()  # until the bench kills this process
    return 0


# ---------------------------------------------------------------- the measured processes


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    url: str | None = None  # scraped every second when set
    ps: psutil.Process | None = None
    cpu0: float = 0.0
    rss: list[float] = field(default_factory=list)
    scrape_ms: list[float] = field(default_factory=list)
    scrape_errors: int = 0
    scrape_bytes: int = 0


def _line(p: subprocess.Popen[bytes], within: float) -> str:
    """The first line of a child's stream (its stdout or stderr, as piped)."""
    stream = p.stdout if p.stdout is not None else p.stderr
    assert stream is not None
    fd, buf, end = stream.fileno(), b"", time.monotonic() + within
    while not buf.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            raise SystemExit(f"no start line from {p.args!r} within {within:g} s")
        chunk = os.read(fd, 1)
        if not chunk:
            raise SystemExit(f"{p.args!r} exited: {buf.decode()!r}")
        buf += chunk
    return buf.decode()


def start_all(args: argparse.Namespace) -> list[Proc]:
    src = ["--interval", "1"] if args.live else ["--demo", "--loop"]
    exporter = subprocess.Popen(
        [sys.executable, "-m", "gputui", "exporter", *src, "--listen", "127.0.0.1:0"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    procs = [Proc("exporter", exporter)]
    line = _line(exporter, 60)
    procs[0].url = line.split("serving ", 1)[1].split()[0]
    for mode, name in (("detector", "sampler+detector"), ("bare", "bare sampler")):
        cmd = [sys.executable, __file__, "--baseline", mode] + (["--live"] if args.live else [])
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        procs.append(Proc(name, p))
        _line(p, 60)
    if args.compare_cmd:
        p = subprocess.Popen(
            shlex.split(args.compare_cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        procs.append(Proc(args.compare_name, p, url=args.compare_url))
    return procs


def scrape(p: Proc) -> None:
    assert p.url is not None
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(p.url, timeout=5) as r:
            p.scrape_bytes = len(r.read())
        p.scrape_ms.append((time.perf_counter() - t) * 1000)
    except OSError:
        p.scrape_errors += 1


def measure(procs: list[Proc], duration: float) -> list[dict[str, Any]]:
    end_warmup = time.monotonic() + WARMUP_S
    while time.monotonic() < end_warmup:  # scrape during the warm-up too, as Prometheus does
        for p in procs:
            if p.url:
                scrape(p)
        time.sleep(1.0)
    for p in procs:
        p.scrape_ms, p.scrape_errors = [], 0  # count the measured window only
        p.ps = psutil.Process(p.popen.pid)
        c = p.ps.cpu_times()
        p.cpu0 = c.user + c.system
    t0 = time.monotonic()
    tick = t0
    while tick - t0 < duration:
        for p in procs:
            if p.url:
                scrape(p)
            assert p.ps is not None
            p.rss.append(p.ps.memory_info().rss / 2**20)
        tick += 1.0
        time.sleep(max(0.0, tick - time.monotonic()))  # one scrape a second, on the second
    wall = time.monotonic() - t0
    rows = []
    for p in procs:
        assert p.ps is not None
        c = p.ps.cpu_times()
        rows.append(
            {
                "name": p.name,
                "cpu_pct": 100.0 * (c.user + c.system - p.cpu0) / wall,
                "rss_mib": p.rss[-1],
                "rss_max_mib": max(p.rss),
                "scrapes": len(p.scrape_ms) if p.url else None,
                "scrape_errors": p.scrape_errors if p.url else None,
                "scrape_ms_median": median(p.scrape_ms) if p.url else None,
                "scrape_ms_p99": pct(p.scrape_ms, 99) if p.url else None,
                "scrape_kib": p.scrape_bytes / 1024 if p.url else None,
            }
        )
    return rows


def stop_all(procs: list[Proc]) -> None:
    for p in procs:
        if p.popen.poll() is None:
            p.popen.terminate()
    for p in procs:
        try:
            p.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.popen.kill()
            p.popen.wait(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=60.0, help="measured seconds (60)")
    ap.add_argument("--live", action="store_true", help="sample NVML (a GPU node)")
    ap.add_argument("--compare-cmd", help="another exporter to run and scrape beside it")
    ap.add_argument("--compare-url", help="its metrics URL")
    ap.add_argument("--compare-name", default="other exporter")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--baseline", choices=["bare", "detector"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.baseline:
        return _baseline(args.baseline, args.live)
    if bool(args.compare_cmd) != bool(args.compare_url):
        ap.error("--compare-cmd and --compare-url go together")
    m = machine()
    print(machine_line(m))
    procs = start_all(args)
    try:
        rows = measure(procs, args.duration)
    finally:
        stop_all(procs)
    source = "live NVML, 1 sample/s" if args.live else "demo replay, 4 samples/s"
    print(f"{source}; scraped every 1 s for {args.duration:g} s after {WARMUP_S:g} s warm-up")
    cols = ["name", "cpu_pct", "rss_mib", "rss_max_mib", "scrapes", "scrape_ms_median"]
    cols += ["scrape_ms_p99", "scrape_kib"]
    heads = ["process", "CPU %", "RSS MiB", "max RSS", "scrapes", "scrape ms p50", "p99", "KiB"]
    print(table([[r[c] for c in cols] for r in rows], heads))
    errors = sum(r["scrape_errors"] or 0 for r in rows)
    if errors:
        print(f"scrape errors: {errors}")
    write_json(args.json, "exporter_cost", {"source": source, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
