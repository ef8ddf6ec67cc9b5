"""A small healthy DDP-style job for the device checks: matmuls + all_reduce per step.

Run under torchrun:
  python3 -m torch.distributed.run --nproc-per-node 2 scripts/device/train_worker.py SECONDS
"""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

dur = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
rank = int(os.environ["RANK"])
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group(
    "nccl", timeout=datetime.timedelta(seconds=120), device_id=torch.device("cuda", local)
)
w = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
grad = torch.randn(32 * 1024 * 1024, device="cuda")
dist.all_reduce(grad)
torch.cuda.synchronize()
print(f"READY {rank} pid={os.getpid()}", flush=True)
t0 = time.time()
steps = 0
while time.time() - t0 < dur:
    for _ in range(4):
        w2 = w @ w
    dist.all_reduce(grad)
    torch.cuda.synchronize()
    steps += 1
print(f"DONE {rank} steps={steps}", flush=True)
dist.destroy_process_group()
