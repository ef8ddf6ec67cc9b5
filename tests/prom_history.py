"""A cluster's GPU history in a real Prometheus, for `check --prometheus` (tests and bench).

`write_openmetrics` writes dcgm-exporter's series (as dcgm-exporter names and labels them)
for a list of GPUs whose readings a function gives per sample time; `HistoryServer`
backfills the file with `promtool tsdb create-blocks-from openmetrics` and starts
`prometheus` on a free port against the blocks, waiting for `/-/ready` under a deadline.

The readings of each phase are the real ones of an H200 (700 W limit), measured on a
2 x H200 node: training util ~98 / memory ~23 % / ~690 W; a rank spinning in a collective
that never completes util 100 / memory 0 / ~123 W; a rank stuck on its CPU side with its
context held util 0 / memory 0 / ~120 W.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from prometheus_proc import PrometheusProc

MISSING = [t for t in ("prometheus", "promtool") if shutil.which(t) is None]

TRAIN = {"util": 98, "mem": 23, "power": 690.0}
SPIN = {"util": 100, "mem": 0, "power": 123.0}
STUCK = {"util": 0, "mem": 0, "power": 120.0}
LIMIT_W = 700.0


@dataclass
class Gpu:
    """One GPU of the scenario: where it is, whose it is, and its readings at time t (None:
    not scraped then)."""

    host: str
    index: int
    pod: str | None
    namespace: str | None
    read: Callable[[float], dict[str, float] | None]
    model: str = "NVIDIA H200"
    container: str = "trainer"
    style: str = "dcgm"  # or "gputui": gputui's own exporter's labels (gpu, uuid, host)

    @property
    def uuid(self) -> str:
        n = sum(map(ord, self.host)) * 16 + self.index
        return f"GPU-{n:08x}-1111-2222-3333-{self.index:012x}"

    def labels(self) -> str:
        if self.style == "gputui":
            return f'{{gpu="{self.index}",uuid="{self.uuid}",host="{self.host}"}}'
        parts = [
            f'gpu="{self.index}"',
            f'UUID="{self.uuid}"',
            f'device="nvidia{self.index}"',
            f'modelName="{self.model}"',
            f'Hostname="{self.host}"',
        ]
        if self.pod:
            parts += [
                f'container="{self.container}"',
                f'namespace="{self.namespace}"',
                f'pod="{self.pod}"',
            ]
        return "{" + ",".join(parts) + "}"


# reading key -> (metric, type, scale)
METRICS = (
    ("util", "DCGM_FI_DEV_GPU_UTIL", "gauge", 1.0),
    ("mem", "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", 1.0),
    ("power", "DCGM_FI_DEV_POWER_USAGE", "gauge", 1.0),
    ("limit", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", 1.0),
    ("fb_used", "DCGM_FI_DEV_FB_USED", "gauge", 1.0),
    ("sm_clock", "DCGM_FI_DEV_SM_CLOCK", "gauge", 1.0),
    ("temp", "DCGM_FI_DEV_GPU_TEMP", "gauge", 1.0),
    ("xid", "DCGM_FI_DEV_XID_ERRORS", "gauge", 1.0),
    # a counter, named as DCGM names it (no OpenMetrics _total suffix)
    ("ecc_dbe", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "unknown", 1.0),
)
# gputui's own exporter (gputui/exporter/metrics.py): ratios, bytes, a process count
GPUTUI_METRICS = (
    ("util", "gputui_gpu_utilization_ratio", "gauge", 0.01),
    ("mem", "gputui_gpu_memory_utilization_ratio", "gauge", 0.01),
    ("power", "gputui_gpu_power_watts", "gauge", 1.0),
    ("limit", "gputui_gpu_power_limit_watts", "gauge", 1.0),
    ("procs", "gputui_gpu_processes", "gauge", 1.0),
)
DEFAULTS = {
    "limit": LIMIT_W,
    "fb_used": 81000.0,
    "sm_clock": 1980.0,
    "temp": 41.0,
    "xid": 0.0,
    "procs": 1.0,
}


def write_openmetrics(path: Path, gpus: Iterable[Gpu], times: list[float]) -> int:
    """The series as OpenMetrics text ending in `# EOF` (gzip when the name ends in .gz);
    one family after the other, each series in time order, as promtool wants. Returns the
    number of samples written."""
    gpus = list(gpus)
    readings = {id(g): [g.read(t) for t in times] for g in gpus}
    n = 0
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:  # type: ignore[operator]
        families = [
            (style, *m) for style, ms in (("dcgm", METRICS), ("gputui", GPUTUI_METRICS)) for m in ms
        ]
        for style, key, metric, kind, scale in families:
            mine = [g for g in gpus if g.style == style]
            if not mine:
                continue
            f.write(f"# TYPE {metric} {kind}\n")
            for g in mine:
                labels = g.labels()
                for t, r in zip(times, readings[id(g)], strict=True):
                    if r is None:
                        continue
                    v = r.get(key, DEFAULTS.get(key))
                    if v is None:
                        continue
                    f.write(f"{metric}{labels} {v * scale:g} {t:.3f}\n")
                    n += 1
        f.write("# EOF\n")
    return n


class HistoryServer(PrometheusProc):
    """A real Prometheus serving the backfilled file's series (read-only: no scrapes)."""

    def __init__(self, tmp: Path, openmetrics: Path | None) -> None:
        """`openmetrics` None: serve the blocks already backfilled into tmp/data."""
        data = tmp / "data"
        if openmetrics is not None:
            self._backfill(openmetrics, data)
        self._start(tmp, data)

    @staticmethod
    def _backfill(openmetrics: Path, data: Path) -> None:
        r = subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(data)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if r.returncode != 0:
            raise AssertionError("promtool failed:\n" + (r.stdout + r.stderr)[-3000:])

    def _start(self, tmp: Path, data: Path) -> None:
        cfg = tmp / "prometheus.yml"
        cfg.write_text("global: {scrape_interval: 1h, evaluation_interval: 1h}\n")
        args = [f"--storage.tsdb.path={data}", "--storage.tsdb.retention.time=100y"]
        self._launch(tmp, cfg, args, 60)


def grid(start: float, end: float, step: float, jitter: float = 0.0) -> list[float]:
    """Scrape times from start to end, every step (plus a constant jitter, as a scraper's
    offset)."""
    n = int((end - start) // step) + 1
    return [start + i * step + jitter for i in range(n)]


def check(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputui", "check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=Path(__file__).resolve().parent.parent,
    )


def lines(r: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(x) for x in r.stdout.splitlines()]


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1, r.stderr
    for w in words:
        assert w in err[0], err[0]
