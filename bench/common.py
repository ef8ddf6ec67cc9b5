"""Helpers the benchmarks share: statistics, the machine they ran on, tables, JSON output.

Every bench script can run on its own (`python bench/<name>.py --help`) and from
`bench/run.py`; each returns a dict of results that is printed as a table and, with
`--json PATH`, written out as JSON together with a description of the machine.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing gputui
    sys.path.insert(0, str(ROOT))


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def pct(xs: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), nearest rank."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def gpu_names() -> list[str]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    try:
        names = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            n = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(n.decode() if isinstance(n, bytes) else str(n))
        return names
    finally:
        pynvml.nvmlShutdown()


def machine() -> dict[str, Any]:
    """What the figures came from."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 0
    mem_gib = None
    try:
        import psutil

        mem_gib = round(psutil.virtual_memory().total / 2**30, 1)
    except Exception:
        pass
    return {
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": cpu_model(),
        "mem_gib": mem_gib,
        "gpus": gpu_names(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


def machine_line(m: dict[str, Any]) -> str:
    gpus = m.get("gpus") or []
    g = f"{len(gpus)} x {gpus[0]}" if gpus else "no GPU"
    return (
        f"{m['host']}: {m['cpus_usable']}/{m['cpus']} CPUs ({m['cpu_model']}), "
        f"{m['mem_gib']} GiB, {g}, Python {m['python']}"
    )


def fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:  # nan
            return "-"
        if abs(v) >= 100:
            return f"{v:.0f}"
        return f"{v:.{digits}f}"
    return str(v)


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> str:
    body = [[fmt(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in body:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False))]
    lines.append("  ".join("-" * w for w in widths))
    for r in body:
        lines.append("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=False)))
    return "\n".join(lines)


def write_json(path: str | None, name: str, result: dict[str, Any]) -> None:
    if not path:
        return
    data = {"bench": name, "machine": machine(), "result": result}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
        f.write("\n")


class CpuClock:
    """CPU seconds (user + system, all threads of this process) and wall seconds."""

    __slots__ = ("cpu", "wall")

    def __init__(self) -> None:
        self.cpu = time.process_time()
        self.wall = time.perf_counter()

    def lap(self) -> tuple[float, float]:
        c, w = time.process_time(), time.perf_counter()
        out = (c - self.cpu, w - self.wall)
        self.cpu, self.wall = c, w
        return out
