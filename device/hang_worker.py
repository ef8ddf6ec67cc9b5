"""A two-rank NCCL job for device/check_detector.sh, in one of four modes.

  heavy  back-to-back all_reduce of 256 MiB (healthy, high util at modest power)
  idle   each rank holds 4 GiB and sleeps (an idle inference server: not a hang)
  hang   rank 1 sleeps in a "data loader" while rank 0 waits inside all_reduce
  die    rank 1 exits with status 3 while rank 0 waits inside all_reduce

Usage: torchrun --nproc-per-node 2 device/hang_worker.py MODE LIFETIME
Every mode ends by itself after LIFETIME seconds.
"""

from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def main() -> None:
    mode, lifetime = sys.argv[1], float(sys.argv[2])
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=lifetime + 60))
    x = torch.ones(64 << 20, device="cuda")  # 256 MiB of float32
    for _ in range(3):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    os.write(1, f"READY rank={rank} pid={os.getpid()} mode={mode}\n".encode())
    end = time.monotonic() + lifetime
    if mode == "heavy":
        while time.monotonic() < end:
            for _ in range(10):
                dist.all_reduce(x)
            torch.cuda.synchronize()
    elif mode == "idle":
        hold = torch.empty(1 << 30, dtype=torch.float32, device="cuda")  # 4 GiB
        hold.fill_(1)
        torch.cuda.synchronize()
        time.sleep(max(0.0, end - time.monotonic()))
    elif rank == 1 and mode == "die":
        os._exit(3)
    elif rank == 1:
        time.sleep(max(0.0, end - time.monotonic()))
    else:
        dist.all_reduce(x)  # never completes: rank 1 never joins
        torch.cuda.synchronize()
    os._exit(0)


if __name__ == "__main__":
    main()
