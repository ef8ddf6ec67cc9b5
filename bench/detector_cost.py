"""Hang detector cost per update on a crowded node: 8 GPUs, N processes.

The dashboard runs the detector on every sample in the sampler thread, so its cost adds to
the sampler's tick. One 8-rank job spins on 7 GPUs (the eighth is idle: the suspect), and
the other processes are one-process jobs spread over the GPUs, as notebooks would be.

    python bench/detector_cost.py --procs 1000 --updates 200
    python bench/detector_cost.py --watcher   # also the dashboard's whole Watcher.update()

`--watcher` adds what the dashboard runs per sample (gputui.watch.watcher.Watcher, live, stacks
off): on the same crowded node, and on an idle one (8 GPUs at 0%, N processes, no ranks,
no job), where everything beyond the detector has nothing to do and should cost nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import machine, machine_line, median, write_json  # noqa: E402

from gputui.collect.model import GpuSample, ProcessInfo, RankInfo, Snapshot  # noqa: E402
from gputui.collect.procs.jobs import group_jobs  # noqa: E402
from gputui.diagnose.hang.detector import Detector  # noqa: E402


def crowded(t: float, procs: int, gpus: int = 8) -> Snapshot:
    """7 spinning ranks, one idle rank, and `procs - gpus` unrelated one-process jobs."""
    infos, on_gpu = [], {i: [] for i in range(gpus)}
    for k in range(procs):
        i = k % gpus
        pid = 10_000 + k
        rank = RankInfo(rank=i, world_size=gpus, master="h:29500") if k < gpus else None
        infos.append(ProcessInfo(pid=pid, cmdline=("python",), gpus=(i,), rank=rank))
        on_gpu[i].append(pid)
    samples = tuple(
        GpuSample(
            index=i,
            util=0.0 if i == gpus - 1 else 100.0,
            mem_util=0.0,
            power_w=120.0,
            power_limit_w=700.0,
            pids=tuple(on_gpu[i]),
        )
        for i in range(gpus)
    )
    return Snapshot(t=t, gpus=samples, processes=tuple(infos), jobs=group_jobs(infos))


def measure(procs: int, updates: int) -> dict[str, float]:
    snaps = [crowded(0.0, procs), crowded(0.0, procs)]
    det = Detector()
    times = []
    for k in range(updates):
        snap = Snapshot(**{**snaps[k % 2].__dict__, "t": 1000 + 0.25 * k})
        start = time.process_time()
        v = det.update(snap)
        times.append(time.process_time() - start)
    assert v.state != "ok" and v.suspects == (7,), v.reason  # the work measured was real
    return {"procs": procs, "ms_per_update": 1000 * median(times)}


def idle(t: float, procs: int, gpus: int = 8) -> Snapshot:
    """8 idle GPUs and `procs` host processes that are not ranks: nothing to watch."""
    infos = [ProcessInfo(pid=10_000 + k, cmdline=("sshd",)) for k in range(procs)]
    samples = tuple(
        GpuSample(index=i, util=0.0, mem_util=0.0, power_w=60.0, power_limit_w=700.0)
        for i in range(gpus)
    )
    return Snapshot(t=t, gpus=samples, processes=tuple(infos), jobs=group_jobs(infos))


def measure_watcher(procs: int, updates: int, node: str) -> dict[str, float]:
    """CPU of the calling thread per Watcher.update() (its helpers' threads not counted)."""
    from gputui.watch.watcher import Watcher

    make = crowded if node == "crowded" else idle
    snaps = [make(0.0, procs), make(0.0, procs)]
    w = Watcher(auto_dump=False, live=True)
    times = []
    try:
        for k in range(updates):
            snap = Snapshot(**{**snaps[k % 2].__dict__, "t": 1000 + 0.25 * k})
            start = time.thread_time()
            w.update(snap)
            times.append(time.thread_time() - start)
    finally:
        w.close()
    return {"procs": procs, "node": node, "ms_per_update": 1000 * median(times)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, nargs="+", default=[8, 100, 1000])
    ap.add_argument("--updates", type=int, default=200)
    ap.add_argument("--watcher", action="store_true", help="also the whole Watcher.update()")
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args()
    m = machine()
    print(machine_line(m))
    rows = [measure(n, args.updates) for n in args.procs]
    for r in rows:
        print(f"detector, 8 GPUs, {r['procs']:5d} procs: {r['ms_per_update']:.2f} ms CPU/update")
    watcher = []
    if args.watcher:
        for node in ("crowded", "idle"):
            for n in args.procs:
                r = measure_watcher(n, args.updates, node)
                watcher.append(r)
                print(
                    f"watcher, {node:7}, 8 GPUs, {n:5d} procs: "
                    f"{r['ms_per_update']:.3f} ms CPU/update"
                )
    write_json(args.json, "detector", {"rows": rows, "watcher": watcher})
    return 0


if __name__ == "__main__":
    sys.exit(main())
