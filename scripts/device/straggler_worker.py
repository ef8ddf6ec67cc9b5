"""Two NCCL ranks on GPU 0 of a one-GPU machine, for scripts/device/check_straggler.sh.

Each rank gets its own NCCL_HOSTID (NCCL then takes it for a node of its own and connects the
ranks over loopback), so one GPU holds a whole 2-rank job. Modes:

  imbalanced  each step: rank 0 runs 16 bf16 4096^3 matmuls, rank 1 runs 1, then all_reduce
  comm        each step: only an all_reduce of 256 MiB (a communication-only benchmark)

With STRAGGLER_SEPARATE_GPUS=1 (a machine with 2+ GPUs) each rank gets a GPU of its own
(LOCAL_RANK = rank) and NCCL connects them as on any node.

Usage: python3 scripts/device/straggler_worker.py MODE SECONDS     (starts both ranks itself)
Lines: READY rank=R pid=P, DONE rank=R steps=S. Every rank is bounded by SIGALRM.
"""

from __future__ import annotations

import datetime
import os
import signal
import socket
import subprocess
import sys
import time


def spawn(mode: str, seconds: float) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": "0",
            "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "NCCL_HOSTID": f"straggler-node{rank}",
            "NCCL_SOCKET_IFNAME": "lo",
            "NCCL_IB_DISABLE": "1",
            "NCCL_NVLS_ENABLE": "0",
        }
        if os.environ.get("STRAGGLER_SEPARATE_GPUS") == "1":
            env["LOCAL_RANK"] = str(rank)
            for k in ("NCCL_HOSTID", "NCCL_SOCKET_IFNAME"):
                env.pop(k)
        cmd = [sys.executable, os.path.abspath(__file__), "--rank", mode, str(seconds)]
        procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL))  # noqa: S603
    return max(p.wait() for p in procs)


def rank_main(mode: str, seconds: float) -> None:
    import torch
    import torch.distributed as dist

    signal.alarm(int(seconds) + 60)  # bounded even inside a collective
    rank = int(os.environ["RANK"])
    dev = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(dev)
    dist.init_process_group(
        "nccl", timeout=datetime.timedelta(seconds=120), device_id=torch.device("cuda", dev)
    )
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    grad = torch.randn((256 << 20) // 4 if mode == "comm" else 1 << 20, device="cuda")
    dist.all_reduce(grad)
    torch.cuda.synchronize()
    print(f"READY rank={rank} pid={os.getpid()}", flush=True)
    k = (16 if rank == 0 else 1) if mode == "imbalanced" else 0
    t0, steps = time.time(), 0
    while time.time() - t0 < seconds:
        for _ in range(k):
            w @ w
        dist.all_reduce(grad)
        torch.cuda.synchronize()
        steps += 1
    print(f"DONE rank={rank} steps={steps}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    if sys.argv[1] == "--rank":
        rank_main(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit(spawn(sys.argv[1], float(sys.argv[2])))
