"""A two-rank NCCL job for scripts/device/check_tools.sh, hung the way the calibration run was.

Run under torchrun with 2 processes. Both ranks do a few real all_reduces (so the NCCL
communicator is up), print READY, then rank STUCK_RANK (default 1) waits in
wait_for_the_data_loader() while the other rank enters all_reduce + synchronize and spins
on the GPU waiting for it: the classic hang. Everything exits after LIFETIME seconds.

Usage: torchrun --nproc-per-node 2 scripts/device/tools_worker.py [LIFETIME] [STUCK_RANK]
"""

from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def wait_for_the_data_loader(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.5)


BACKEND = os.environ.get("TOOLS_BACKEND", "nccl")  # gloo: a CPU dry run of the script


def train_step(x: torch.Tensor) -> None:
    dist.all_reduce(x)
    if BACKEND == "nccl":
        torch.cuda.synchronize()


def main() -> None:
    lifetime = float(sys.argv[1]) if len(sys.argv) > 1 else 170.0
    stuck = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    timeout = datetime.timedelta(seconds=lifetime + 120)
    if BACKEND == "nccl":
        torch.cuda.set_device(local)
        try:
            dist.init_process_group("nccl", timeout=timeout, device_id=torch.device("cuda", local))
        except TypeError:  # an older torch without device_id
            dist.init_process_group("nccl", timeout=timeout)
    else:
        dist.init_process_group(BACKEND, timeout=timeout)
    x = torch.ones(1 << 20, device="cuda" if BACKEND == "nccl" else "cpu")
    for _ in range(3):
        train_step(x)
    # One write(2): ranks share the log file, and print() may split text and newline.
    os.write(1, f"READY rank={rank} pid={os.getpid()}\n".encode())
    if rank == stuck:
        wait_for_the_data_loader(lifetime)
    else:
        train_step(x)  # never completes: the stuck rank never joins
    os._exit(0)


if __name__ == "__main__":
    main()
