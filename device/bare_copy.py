"""A bare torch peer copy loop of 1 GiB between cuda:0 and cuda:1, each way: the reference
the probe's copy figure is compared with (the calibration run measured 394 GB/s each way).
Prints one JSON object: {"bytes", "iters", "0->1": GB/s, "1->0": GB/s, "ok": bytes equal}."""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
import torch  # noqa: E402

SIZE = int(sys.argv[1]) if len(sys.argv) > 1 else 2**30
ITERS = 20


def one_way(src: int, dst: int) -> tuple[float, bool]:
    a = torch.randint(0, 256, (SIZE,), dtype=torch.uint8, device=f"cuda:{src}")
    b = torch.empty(SIZE, dtype=torch.uint8, device=f"cuda:{dst}")
    for _ in range(3):  # warm-up: peer access enabled, clocks up
        b.copy_(a)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    t0 = time.perf_counter()
    for _ in range(ITERS):
        b.copy_(a)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    dt = time.perf_counter() - t0
    ok = bool(torch.equal(a.cpu(), b.cpu()))
    return SIZE * ITERS / dt / 1e9, ok


def main() -> int:
    if torch.cuda.device_count() < 2:
        print(json.dumps({"error": f"{torch.cuda.device_count()} CUDA devices"}))
        return 1
    fwd, ok1 = one_way(0, 1)
    back, ok2 = one_way(1, 0)
    print(json.dumps({"bytes": SIZE, "iters": ITERS, "0->1": round(fwd, 1),
                      "1->0": round(back, 1), "ok": ok1 and ok2,
                      "can_access_peer": torch.cuda.can_device_access_peer(0, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
