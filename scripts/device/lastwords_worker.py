"""One rank of a 2-rank NCCL job on one GPU that dies in a way gputui must explain
(scripts/device/check_lastwords.sh): both ranks share GPU 0 (NCCL_HOSTID differs per rank, so NCCL
takes them for two nodes), do a few all_reduces, print `READY rank=R pid=P`, then rank 1
waits until the file named by --go exists (gputui has seen both ranks alive by then) and:

  xid   runs a Triton kernel that stores far outside its buffer: a real MMU fault (Xid 31),
        `torch.AcceleratorError: CUDA error: an illegal memory access was encountered`
  ddp   skips a layer of a DDP model: `RuntimeError: Expected to have finished reduction...`

It prints `DIE rank=1 t=UNIX` just before. Rank 0 goes on into the next all_reduce and waits
there (spinning) for a peer that is gone, until the 120 s NCCL timeout.
"""

from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def wait_for(path: str, limit: float = 120.0) -> None:
    end = time.monotonic() + limit
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.1)


def fault() -> None:
    import triton
    import triton.language as tl

    @triton.jit
    def bad(p):  # type: ignore[no-untyped-def]
        tl.store(p + (1 << 40), 1.0)

    x = torch.zeros(16, device="cuda")
    bad[(1,)](x)
    torch.cuda.synchronize()


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(64, 64), nn.Linear(64, 64)

    def forward(self, x: torch.Tensor, skip: bool) -> torch.Tensor:
        x = self.a(x)
        return x if skip else self.b(x)


def main() -> int:
    mode, go = sys.argv[1], sys.argv[2]
    torch.cuda.set_device(0)
    dist.init_process_group(
        "nccl", timeout=datetime.timedelta(seconds=120), device_id=torch.device("cuda", 0)
    )
    rank = dist.get_rank()
    x = torch.ones(1 << 20, device="cuda")
    m = nn.parallel.DistributedDataParallel(Model().cuda(), device_ids=[0])
    inp = torch.randn(8, 64, device="cuda")
    for _ in range(2):
        dist.all_reduce(x)
        m(inp, skip=False).sum().backward()
    torch.cuda.synchronize()
    print(f"READY rank={rank} pid={os.getpid()}", flush=True)
    wait_for(go)
    if rank == 1:
        print(f"DIE rank=1 t={time.time():.3f}", flush=True)
        if mode == "xid":
            fault()
        else:
            m(inp, skip=True).sum().backward()
            m(inp, skip=True).sum().backward()  # raises: the reduction never finished
    for _ in range(1000):
        dist.all_reduce(x)
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
