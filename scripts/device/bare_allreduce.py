"""A bare torch all_reduce between two "hosts" sharing GPU 0 (NCCL_HOSTID differs per rank):
the figure the world probe's bus bandwidth is compared with, at the same size and iterations.

Usage: python3 scripts/device/bare_allreduce.py BYTES ITERS PORT -> one JSON line on stdout.
"""

import json
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank: int, size: int, iters: int, port: int, q) -> None:
    os.environ["NCCL_HOSTID"] = f"h{rank + 1}"
    torch.cuda.set_device(0)
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=timedelta(seconds=60))
    dist.init_process_group("nccl", store=store, rank=rank, world_size=2)
    x = torch.ones(size // 4, device="cuda")
    dist.all_reduce(x)  # warm-up, as the probe's checked first call
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / iters
    q.put({"rank": rank, "busbw_gbps": round(size / dt / 1e9, 3)})  # 2(n-1)/n = 1 for n = 2
    dist.destroy_process_group()


if __name__ == "__main__":
    size, iters, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, size, iters, port, q)) for r in range(2)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    got = []
    for _ in range(2):
        try:
            got.append(q.get(timeout=5))
        except Exception:  # a rank that died sent nothing: the figure is then missing
            break
    bw = min((g["busbw_gbps"] for g in got), default=None)
    print(
        json.dumps(
            {
                "bytes": size,
                "iters": iters,
                "busbw_gbps": bw,
                "wall_s": round(time.monotonic() - t0, 2),
            }
        )
    )
