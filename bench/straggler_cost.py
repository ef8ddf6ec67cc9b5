"""Cost of the wait-share bookkeeping (gputui.diagnose.slow.straggler) per sample.

The detector keeps every GPU's wait share on each sample, in the sampler thread, so its cost
adds to the dashboard's tick. Measured here: `WaitShares.observe` + `judge` alone (the
part this feature adds), and the whole `Detector.update` beside it, on 8 GPUs with one
8-rank job whose rank 0 is a straggler, plus unrelated one-process jobs, with a full 30 s
window of history at 4 samples a second (the worst case: every deque full).

    python bench/straggler_cost.py --procs 8 100 1000 --updates 400
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
from gputui.diagnose.job_groups import GroupMemory  # noqa: E402
from gputui.diagnose.slow.straggler import WaitShares  # noqa: E402

DT = 0.25


def slow_node(t: float, procs: int, gpus: int = 8) -> Snapshot:
    """Rank 0 computes, ranks 1-7 wait (4 x H200 levels), `procs - gpus` other processes."""
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
            util=99.0,
            mem_util=23.0 if i == 0 else 8.0,
            power_w=690.0 if i == 0 else 320.0,
            power_limit_w=700.0,
            pids=tuple(on_gpu[i]),
        )
        for i in range(gpus)
    )
    return Snapshot(t=t, gpus=samples, processes=tuple(infos), jobs=group_jobs(infos))


def measure(procs: int, updates: int) -> dict[str, float]:
    base = slow_node(0.0, procs)
    warm = int(30 / DT)  # fill the window first: the steady state is the worst case
    snaps = [Snapshot(**{**base.__dict__, "t": 1000 + DT * k}) for k in range(warm + updates)]
    memory, shares = GroupMemory(), WaitShares()
    groups = [memory.update(s) for s in snaps]
    book = []
    for k, (s, g) in enumerate(zip(snaps, groups, strict=True)):
        start = time.process_time()
        shares.observe(s, g)
        out = shares.judge(s, g)
        if k >= warm:
            book.append(time.process_time() - start)
    assert any(x.stragglers == (0,) for x in out), "the work measured was real"
    det, whole = Detector(), []
    for k, s in enumerate(snaps):
        start = time.process_time()
        v = det.update(s)
        if k >= warm:
            whole.append(time.process_time() - start)
    assert v.state == "slow" and v.stragglers == (0,), v.reason
    return {
        "procs": procs,
        "us_bookkeeping": 1e6 * median(book),
        "ms_detector_update": 1000 * median(whole),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, nargs="+", default=[8, 100, 1000])
    ap.add_argument("--updates", type=int, default=400)
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args()
    m = machine()
    print(machine_line(m))
    rows = [measure(n, args.updates) for n in args.procs]
    for r in rows:
        print(
            f"wait shares, 8 GPUs, {r['procs']:5d} procs: {r['us_bookkeeping']:.1f} us CPU/sample "
            f"(whole detector update {r['ms_detector_update']:.2f} ms)"
        )
    write_json(args.json, "straggler", {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
