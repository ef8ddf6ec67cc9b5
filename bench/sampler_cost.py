"""Figure 1: what one sampler tick costs, against the floor of the same reads in a plain loop.

CPU box (default): N real child processes (`/bin/sleep 600`, started with torchrun-like rank
variables, 8 ranks per job) are handed to gputui's `LiveSource.sample()` as if NVML listed
them on 8 GPUs (a stand-in NVML reader returns prebuilt GPU readings, so only gputui's own
work is timed: ProcessReader.read, the pid/GPU bookkeeping, group_jobs, the Snapshot). The
floor is a plain loop over cached psutil.Process objects making the same per-tick reads
(cpu_percent, memory_info, status under oneshot). Ticks of the two alternate, back to back,
so a noisy neighbour hits both alike; the ratio is the median of per-pair ratios' inputs
(median sampler / median floor) over one run.

GPU node (`--nvml`): NvmlReader.read() on 1 GPU and on all GPUs against the same NVML calls
in a plain loop (utilization, power, enforced limit, memory info, temperature, SM and memory
clocks, pstate, clock event reasons, compute processes), and the whole LiveSource.sample()
against NVML floor + psutil floor for the processes NVML reports.

    python bench/sampler_cost.py --procs 0 100 500 1000 --ticks 200
    python bench/sampler_cost.py --nvml --ticks 300
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import psutil
from common import CpuClock, machine, machine_line, median, pct, table, write_json

from gputui.collect.live import LiveSource
from gputui.collect.model import GpuSample

RANKS_PER_JOB = 8
FAKE_GPUS = 8


# ---------------------------------------------------------------- children


def spawn(n: int) -> list[subprocess.Popen[bytes]]:
    """n sleeping processes with rank variables, as the ranks of n/8 torchrun jobs."""
    procs: list[subprocess.Popen[bytes]] = []
    base = dict(os.environ)
    for i in range(n):
        job, rank = divmod(i, RANKS_PER_JOB)
        env = {
            **base,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(RANKS_PER_JOB),
            "LOCAL_WORLD_SIZE": str(RANKS_PER_JOB),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(30000 + job),
        }
        procs.append(
            subprocess.Popen(
                ["/bin/sleep", "600"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return procs


def reap(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        try:
            p.kill()
        except OSError:
            pass
    for p in procs:
        try:
            p.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


# ---------------------------------------------------------------- stand-in NVML


class FakeNvml:
    """Prebuilt GPU readings listing the given pids, round robin over `gpus` GPUs."""

    def __init__(self, pids: Sequence[int], gpus: int = FAKE_GPUS) -> None:
        self.error: str | None = None
        self.driver = "bench"
        self.devices = list(range(gpus))
        self._gpus = [
            GpuSample(
                index=i,
                name="bench GPU",
                util=100.0,
                mem_util=0.0,
                power_w=120.0,
                power_limit_w=700.0,
                mem_used_mb=1000.0,
                mem_total_mb=143771.0,
                pids=tuple(pids[i::gpus]),
                proc_mem_mb=tuple((p, 512.0) for p in pids[i::gpus]),
            )
            for i in range(gpus)
        ]

    def read(self) -> list[GpuSample]:
        return list(self._gpus)

    def close(self) -> None:
        pass


def psutil_floor(procs: Sequence[psutil.Process]) -> None:
    """The same per-tick reads ProcessReader makes, and nothing else."""
    for p in procs:
        try:
            with p.oneshot():
                p.cpu_percent(None)
                p.memory_info()
                p.status()
        except psutil.Error:
            pass


def raw_floor(pids: Sequence[int]) -> None:
    """Below psutil: the two /proc files those reads come from, read with os.read."""
    for pid in pids:
        for name in ("stat", "statm"):
            try:
                fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY)
            except OSError:
                continue
            try:
                os.read(fd, 4096)
            finally:
                os.close(fd)


def alternate(
    a: Callable[[], Any], b: Callable[[], Any], ticks: int
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Run a and b alternately `ticks` times each: (cpu_a, wall_a, cpu_b, wall_b) in s."""
    ca, wa, cb, wb = [], [], [], []
    clock = CpuClock()
    for i in range(ticks):
        for first in (i % 2 == 0, i % 2 == 1):
            clock.lap()
            (a if first else b)()
            c, w = clock.lap()
            if first:
                ca.append(c)
                wa.append(w)
            else:
                cb.append(c)
                wb.append(w)
    return ca, wa, cb, wb


def stats(name: str, cpu: list[float], wall: list[float]) -> dict[str, Any]:
    return {
        "what": name,
        "cpu_ms_median": median(cpu) * 1e3,
        "cpu_ms_p90": pct(cpu, 90) * 1e3,
        "wall_ms_median": median(wall) * 1e3,
        "ticks": len(cpu),
    }


# ---------------------------------------------------------------- CPU box


def bench_procs(n: int, ticks: int) -> dict[str, Any]:
    children = spawn(n)
    try:
        pids = [c.pid for c in children]
        time.sleep(0.2 if n else 0.0)  # let exec finish: the cmdline is that of sleep
        src = LiveSource(interval=1.0)
        src.nvml.close()
        src.nvml = FakeNvml(pids)  # type: ignore[assignment]
        src.host = None
        src.kind = "nvml"
        clock = CpuClock()
        first = src.sample()
        first_cpu, first_wall = clock.lap()
        assert len(first.processes) == n, (len(first.processes), n)
        assert n == 0 or first.jobs, "no jobs found from the rank variables"
        cached = [psutil.Process(p) for p in pids]
        psutil_floor(cached)
        sc, sw, fc, fw = alternate(src.sample, lambda: psutil_floor(cached), ticks)
        raw_cpu = []
        clock.lap()
        for _ in range(max(1, ticks // 4)):
            raw_floor(pids)
            raw_cpu.append(clock.lap()[0])
        snap = src.sample()
        assert len(snap.processes) == n
        s, f = stats("sampler", sc, sw), stats("floor", fc, fw)
        ratio = s["cpu_ms_median"] / f["cpu_ms_median"] if n else None
        return {
            "procs": n,
            "jobs": len(snap.jobs),
            "first_tick_cpu_ms": first_cpu * 1e3,
            "first_tick_wall_ms": first_wall * 1e3,
            "sampler": s,
            "floor": f,
            "ratio_cpu": ratio,
            "raw_proc_floor_cpu_ms": median(raw_cpu) * 1e3,
            "sampler_us_per_proc": s["cpu_ms_median"] * 1e3 / n if n else None,
            "floor_us_per_proc": f["cpu_ms_median"] * 1e3 / n if n else None,
        }
    finally:
        reap(children)


# ---------------------------------------------------------------- GPU node


def nvml_floor_fn(handles: Sequence[Any]) -> Callable[[], None]:
    import pynvml as nv

    events = (
        getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    try:
        nv.nvmlDeviceGetMemoryInfo(handles[0], version=nv.nvmlMemory_v2)
        mem_kw: dict[str, Any] = {"version": nv.nvmlMemory_v2}
    except Exception:
        mem_kw = {}
    calls: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
        (nv.nvmlDeviceGetUtilizationRates, (), {}),
        (nv.nvmlDeviceGetPowerUsage, (), {}),
        (nv.nvmlDeviceGetEnforcedPowerLimit, (), {}),
        (nv.nvmlDeviceGetMemoryInfo, (), mem_kw),
        (nv.nvmlDeviceGetTemperature, (nv.NVML_TEMPERATURE_GPU,), {}),
        (nv.nvmlDeviceGetClockInfo, (nv.NVML_CLOCK_SM,), {}),
        (nv.nvmlDeviceGetClockInfo, (nv.NVML_CLOCK_MEM,), {}),
        (nv.nvmlDeviceGetPerformanceState, (), {}),
        (events, (), {}),
        (nv.nvmlDeviceGetComputeRunningProcesses, (), {}),
    ]

    def floor() -> None:
        for h in handles:
            for fn, args, kw in calls:
                try:
                    fn(h, *args, **kw)
                except nv.NVMLError:
                    pass

    return floor


def bench_nvml(ticks: int) -> dict[str, Any]:
    src = LiveSource(interval=1.0)
    reader = src.nvml
    if not reader.devices:
        return {"skipped": f"no GPU: {reader.error}"}
    devices = list(reader.devices)
    out: dict[str, Any] = {"gpus": len(devices), "driver": reader.driver, "read": []}
    counts = sorted({1, len(devices)})
    for k in counts:
        reader.devices = devices[:k]
        reader.read()
        floor = nvml_floor_fn([d.handle for d in devices[:k]])
        rc, rw, fc, fw = alternate(reader.read, floor, ticks)
        r, f = stats("NvmlReader.read", rc, rw), stats("NVML floor", fc, fw)
        out["read"].append(
            {
                "gpus": k,
                "reader": r,
                "floor": f,
                "ratio_cpu": r["cpu_ms_median"] / f["cpu_ms_median"],
                "ratio_wall": r["wall_ms_median"] / f["wall_ms_median"],
                "reader_cpu_us_per_gpu": r["cpu_ms_median"] * 1e3 / k,
                "floor_cpu_us_per_gpu": f["cpu_ms_median"] * 1e3 / k,
            }
        )
    reader.devices = devices
    # the whole tick with whatever runs on the GPUs now
    snap = src.sample()
    pids = sorted({p for g in snap.gpus for p in g.pids})
    cached = []
    for p in pids:
        try:
            cached.append(psutil.Process(p))
        except psutil.Error:
            pass
    nv_floor = nvml_floor_fn([d.handle for d in devices])

    def floor() -> None:
        nv_floor()
        psutil_floor(cached)

    psutil_floor(cached)
    sc, sw, fc, fw = alternate(src.sample, floor, ticks)
    s, f = stats("LiveSource.sample", sc, sw), stats("NVML + psutil floor", fc, fw)
    out["tick"] = {
        "gpu_procs": len(pids),
        "sampler": s,
        "floor": f,
        "ratio_cpu": s["cpu_ms_median"] / f["cpu_ms_median"],
        "ratio_wall": s["wall_ms_median"] / f["wall_ms_median"],
    }
    src.close()
    return out


# ---------------------------------------------------------------- output


def report(res: dict[str, Any]) -> str:
    parts = []
    if res.get("procs"):
        rows = [
            (
                r["procs"],
                r["sampler"]["cpu_ms_median"],
                r["floor"]["cpu_ms_median"],
                r["ratio_cpu"],
                r["raw_proc_floor_cpu_ms"],
                r["sampler_us_per_proc"],
                r["sampler"]["wall_ms_median"],
                r["first_tick_cpu_ms"],
            )
            for r in res["procs"]
        ]
        head = (
            "procs",
            "tick CPU ms",
            "psutil floor ms",
            "ratio",
            "raw /proc ms",
            "us/proc",
            "wall ms",
            "1st tick ms",
        )
        parts.append(table(rows, head))
    nv = res.get("nvml")
    if nv and "skipped" in nv:
        parts.append(f"NVML: skipped ({nv['skipped']})")
    elif nv:
        rows = [
            (
                f"read {r['gpus']} GPU",
                r["reader"]["cpu_ms_median"] * 1e3,
                r["floor"]["cpu_ms_median"] * 1e3,
                r["ratio_cpu"],
                r["reader"]["wall_ms_median"] * 1e3,
                r["floor"]["wall_ms_median"] * 1e3,
                r["reader_cpu_us_per_gpu"],
            )
            for r in nv["read"]
        ]
        t = nv["tick"]
        rows.append(
            (
                f"tick, {t['gpu_procs']} GPU procs",
                t["sampler"]["cpu_ms_median"] * 1e3,
                t["floor"]["cpu_ms_median"] * 1e3,
                t["ratio_cpu"],
                t["sampler"]["wall_ms_median"] * 1e3,
                t["floor"]["wall_ms_median"] * 1e3,
                t["sampler"]["cpu_ms_median"] * 1e3 / nv["gpus"],
            )
        )
        head = ("NVML", "CPU us", "floor us", "ratio", "wall us", "floor wall", "CPU us/GPU")
        parts.append(table(rows, head))
    return "\n\n".join(parts)


def run(procs: Sequence[int], ticks: int, nvml: bool) -> dict[str, Any]:
    res: dict[str, Any] = {"procs": [], "ticks": ticks}
    for n in procs:
        res["procs"].append(bench_procs(n, ticks))
    if nvml:
        res["nvml"] = bench_nvml(ticks)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, nargs="*", default=[0, 100, 500, 1000])
    ap.add_argument("--ticks", type=int, default=200, help="ticks of each (default 200)")
    ap.add_argument("--nvml", action="store_true", help="also time real NVML reads")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    print(machine_line(machine()), file=sys.stderr)
    res = run(args.procs, args.ticks, args.nvml)
    print(report(res))
    write_json(args.json, "sampler_cost", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
