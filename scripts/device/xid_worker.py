"""A 2-rank NCCL job on one GPU where rank 1's kernel stores far outside its buffer: a real
Xid 31 (MMU fault) for scripts/device/check_health.sh. The GPU stays usable (a program's fault).

Both ranks share GPU 0 with their own NCCL_HOSTID (as scripts/device/multi_worker.py --share-gpu
does), train for --onset seconds, then rank 1 launches a Triton kernel that writes 2**40
elements past its tensor and dies with "an illegal memory access was encountered"; rank 0
goes on into all_reduce and waits there for a peer that is gone (its GPU spins).

    python3 scripts/device/xid_worker.py --spawn LIFETIME [--onset S]

Lines on stdout: `READY rank=R pid=P`, `LAUNCH rank=1 ...` before the kernel is compiled,
`FAULT rank=1 pid=P t=UNIX` once it is launched (the fault's time),
`ERROR rank=1 ...` with the CUDA error. Each rank ends itself after LIFETIME + 30 s (SIGALRM).
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import socket
import subprocess
import sys
import time

os.environ.update(
    NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1"
)


def say(text: str) -> None:
    os.write(1, (text + "\n").encode())


def spawn(argv: list[str]) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = []
    for rank in range(2):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "NCCL_HOSTID": f"xid-worker-node{rank}",
            "NCCL_SOCKET_IFNAME": "lo",
            "NCCL_IB_DISABLE": "1",
        }
        cmd = [sys.executable, os.path.abspath(__file__), *argv]
        procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL))  # noqa: S603
    say(f"spawned ranks exited: {[p.wait() for p in procs]}")
    return 0


def fault() -> None:
    """The illegal store that gave a real Xid 31 on an H100 (tests/data/health/README.md)."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def store_far_away(p):
        tl.store(p + (1 << 40), 1.0)

    x = torch.zeros(16, device="cuda")
    store_far_away[(1,)](x)  # compiled (a few seconds) and launched: the fault is now
    say(f"FAULT rank=1 pid={os.getpid()} t={time.time():.3f}")
    torch.cuda.synchronize()


def rank_main(a: argparse.Namespace) -> int:
    signal.alarm(int(a.lifetime) + 30)
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    timeout = datetime.timedelta(seconds=a.lifetime + 120)
    dist.init_process_group("nccl", timeout=timeout, device_id=dev)
    x = torch.ones(1 << 20, device=dev)
    w = torch.randn(4096, 4096, dtype=torch.bfloat16, device=dev)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    say(f"READY rank={rank} pid={os.getpid()}")
    end = time.monotonic() + a.onset
    step = 0
    while True:
        flag = torch.tensor([1.0 if time.monotonic() >= end else 0.0], device=dev)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # the ranks agree on the onset step
        if flag.item() > 0:
            break
        for _ in range(4):
            w @ w
        dist.all_reduce(x)
        torch.cuda.synchronize()
        step += 1
    if rank == 1:
        say(f"LAUNCH rank=1 pid={os.getpid()} t={time.time():.3f} step={step}")
        try:
            fault()
        except Exception as e:  # the CUDA error; the process ends with it
            say(f"ERROR rank=1 pid={os.getpid()} t={time.time():.3f} {type(e).__name__}: {e}")
            os._exit(3)
        say("no error?!")
    dist.all_reduce(x)  # rank 0 waits here for a peer that is gone
    torch.cuda.synchronize()
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("lifetime", type=float)
    p.add_argument("--onset", type=float, default=8.0)
    p.add_argument("--spawn", action="store_true")
    a = p.parse_args()
    if a.spawn:
        return spawn([str(a.lifetime), "--onset", str(a.onset)])
    return rank_main(a)


if __name__ == "__main__":
    sys.exit(main())
