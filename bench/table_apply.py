"""Figure 4: the dashboard with 1000 processes in its table: time to apply one snapshot, memory.

The real GputuiApp runs headless (`App.run_test`, 160x50) over a source that never delivers
a sample, so nothing but this script touches the table. For each case the snapshot is applied
with `ProcessTable.apply` (wall ms: rows built, sorted, the visible lines compared and the
changed ones re-drawn), then the rest of the next frame (layout and compositor render in the
app's own loop, until idle; CPU ms, since the wait includes sleeps; headless, so the escape
codes are not written). "total" is the sum: the time the UI is busy for one snapshot.
Medians over --repeat runs.
The "whole snapshot" row times `_render_snapshot` (GPU panels + banner + table + status), as
the app does on each SnapshotReady.

Cases: (a) first fill of an empty table with N rows; (b) the same N rows with ~10% of the
cells changed (CPU%, RSS, state); (c) 50 rows removed and 50 new ones added.
Memory: tracemalloc peak during the first fill, and RSS growth of this process from an empty
table to N rows.

    python bench/table_apply.py --rows 1000 --repeat 7
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psutil
from common import machine, machine_line, median, table, write_json

from gputui.collect.model import GpuSample, ProcessInfo, RankInfo, Snapshot
from gputui.collect.procs.jobs import group_jobs

STATES = ("running", "sleeping", "sleeping", "sleeping", "disk-sleep", "stopped")
COMMANDS = (
    ("python", "-u", "train.py", "--config", "configs/llama-70b.yaml", "--seed"),
    ("python", "-m", "vllm.entrypoints.openai.api_server", "--model", "meta/llama", "--port"),
    ("/usr/bin/python3", "eval.py", "--shard"),
)


class NoSource:
    """A source that never returns: the bench hands snapshots to the UI itself."""

    kind = "nvml"
    description = "bench (no sampling)"

    def sample(self) -> Snapshot | None:
        time.sleep(3600)
        return None

    def next_delay(self) -> float:
        return 1.0

    def close(self) -> None:
        pass


def make_processes(n: int, rng: random.Random, start_pid: int = 10_000) -> list[ProcessInfo]:
    now = time.time()
    out = []
    for i in range(n):
        job, rank = divmod(i, 8)
        cmd = COMMANDS[job % len(COMMANDS)] + (str(rank),)
        out.append(
            ProcessInfo(
                pid=start_pid + i,
                create_time=now - rng.uniform(10, 86_400),
                user=rng.choice(("alice", "bob", "svc-train", "root")),
                name=cmd[0].rsplit("/", 1)[-1],
                cmdline=cmd,
                state=rng.choice(STATES),
                cpu_percent=rng.uniform(0, 400),
                rss_mb=rng.uniform(100, 60_000),
                ppid=start_pid - 1 - job,
                parent_cmd="torchrun --nproc-per-node 8 train.py",
                gpus=(i % 8,),
                gpu_mem_mb=rng.uniform(500, 140_000),
                rank=RankInfo(
                    rank=rank,
                    local_rank=rank,
                    world_size=8,
                    local_world_size=8,
                    master=f"10.0.0.1:{29500 + job}",
                ),
            )
        )
    return out


def make_gpus(procs: list[ProcessInfo], n: int = 8) -> tuple[GpuSample, ...]:
    return tuple(
        GpuSample(
            index=i,
            name="NVIDIA H200",
            util=99.0,
            mem_util=30.0,
            power_w=600.0,
            power_limit_w=700.0,
            mem_used_mb=100_000.0,
            mem_total_mb=143_771.0,
            temp_c=60.0,
            sm_mhz=1980.0,
            mem_mhz=3201.0,
            pstate=0,
            events=0,
            pids=tuple(p.pid for p in procs if i in p.gpus)[:8],
        )
        for i in range(n)
    )


def snapshot(procs: list[ProcessInfo]) -> Snapshot:
    procs_t = tuple(procs)
    return Snapshot(
        t=time.time(),
        gpus=make_gpus(procs),
        processes=procs_t,
        jobs=group_jobs(procs_t),
        hostname="bench",
    )


def change_some(procs: list[ProcessInfo], rng: random.Random, frac: float) -> list[ProcessInfo]:
    """~frac of all cells differ: each changed row gets new CPU%, RSS and state."""
    cells_per_row = 12
    rows = round(len(procs) * frac * cells_per_row / 3)
    idx = set(rng.sample(range(len(procs)), min(len(procs), rows)))
    out = []
    for i, p in enumerate(procs):
        if i in idx:
            p = replace(
                p,
                cpu_percent=(p.cpu_percent or 0) + rng.uniform(5, 50),
                rss_mb=(p.rss_mb or 0) + rng.uniform(50, 500),
                state="running" if p.state != "running" else "sleeping",
            )
        out.append(p)
    return out


def churn(procs: list[ProcessInfo], rng: random.Random, k: int, next_pid: int) -> list[ProcessInfo]:
    drop = set(rng.sample(range(len(procs)), k))
    kept = [p for i, p in enumerate(procs) if i not in drop]
    return kept + make_processes(k, rng, start_pid=next_pid)


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


async def bench(rows: int, repeat: int) -> dict[str, Any]:
    from gputui.ui.app import GputuiApp
    from gputui.ui.widgets.process_table import ProcessTable

    rng = random.Random(6)
    app = GputuiApp(NoSource())  # type: ignore[arg-type]
    results: dict[str, Any] = {"rows": rows, "repeat": repeat, "cases": []}
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        tbl = app.query_one(ProcessTable)

        async def timed(fn: Callable[[], Any]) -> tuple[float, float]:
            """(apply, rest of the frame) in ms: wall, CPU."""
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            c2 = time.process_time()
            await pilot.pause()  # layout and render, in the app's own message loop
            c3 = time.process_time()
            return (t1 - t0) * 1e3, (c3 - c2) * 1e3

        def reset() -> None:
            tbl.apply([], [], 0.0, {})
            tbl._row_cache.clear()

        async def fill(s: Snapshot) -> None:
            reset()
            tbl.apply(s.processes, s.jobs, s.t, {})
            await pilot.pause()

        base = make_processes(rows, rng)
        snap0 = snapshot(base)
        upd = snapshot(change_some(base, rng, 0.10))
        chg = snapshot(churn(base, rng, min(50, rows), next_pid=10_000 + rows + 1))
        await pilot.pause()
        c0 = time.process_time()
        await pilot.pause()
        results["idle_pause_cpu_ms"] = (time.process_time() - c0) * 1e3

        # memory: an empty table to `rows` rows
        reset()
        await pilot.pause()
        gc.collect()
        rss0 = rss_mb()
        tracemalloc.start()
        tbl.apply(snap0.processes, snap0.jobs, snap0.t, {})
        await pilot.pause()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        gc.collect()
        results["tracemalloc_peak_mb"] = peak / 2**20
        results["rss_growth_mb"] = rss_mb() - rss0
        results["rss_mb"] = rss_mb()

        def whole(s: Snapshot) -> Callable[[], None]:
            def go() -> None:
                app.snapshot, app.verdict = s, None
                app.history = {}
                app._render_snapshot()

            return go

        def applying(s: Snapshot) -> Callable[[], None]:
            return lambda: tbl.apply(s.processes, s.jobs, s.t, {})

        cases: list[tuple[str, Snapshot | None, Callable[[], Any], str]] = [
            (f"(a) first fill, {rows} rows", None, applying(snap0), "gpu"),
            ("(b) ~10% of cells changed", snap0, applying(upd), "gpu"),
            ("(c) 50 removed + 50 added", snap0, applying(chg), "gpu"),
            ("(d) same snapshot again", snap0, applying(snap0), "gpu"),
            ("(e) whole snapshot (b), panels too", snap0, whole(upd), "gpu"),
            ("(f) (b) sorted by CPU%: rows move", snap0, applying(upd), "cpu"),
        ]
        for name, before, act, sort_by in cases:
            applies, frames = [], []
            tbl.sort_by = sort_by
            for _ in range(repeat):
                if before is None:
                    reset()
                else:
                    await fill(before)
                await pilot.pause()
                gc.collect()
                a, f = await timed(act)
                applies.append(a)
                frames.append(f)
            totals = [a + f for a, f in zip(applies, frames, strict=True)]
            results["cases"].append(
                {
                    "case": name,
                    "apply_ms_median": median(applies),
                    "apply_ms_max": max(applies),
                    "frame_ms_median": median(frames),
                    "total_ms_median": median(totals),
                    "total_ms_max": max(totals),
                }
            )
        assert len(tbl.rows) == len(upd.processes)
        results["row_count"] = len(tbl.rows)
        tbl.sort_by = "gpu"
    return results


def report(res: dict[str, Any]) -> str:
    rows = [
        (
            c["case"],
            c["apply_ms_median"],
            c["frame_ms_median"],
            c["total_ms_median"],
            c["total_ms_max"],
        )
        for c in res["cases"]
    ]
    head = ("case", "apply ms", "frame CPU ms", "total ms", "total max")
    t = table(rows, head)
    mem = (
        f"memory for {res['rows']} rows: tracemalloc peak {res['tracemalloc_peak_mb']:.1f} MiB, "
        f"RSS growth {res['rss_growth_mb']:.1f} MiB (process RSS {res['rss_mb']:.0f} MiB); "
        f"an idle frame costs {res['idle_pause_cpu_ms']:.2f} ms CPU"
    )
    return f"process table, {res['rows']} rows\n{t}\n{mem}"


def run(rows: int, repeat: int) -> dict[str, Any]:
    return asyncio.run(bench(rows, repeat))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    print(machine_line(machine()), file=sys.stderr)
    res = run(args.rows, args.repeat)
    print(report(res))
    write_json(args.json, "table_apply", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
