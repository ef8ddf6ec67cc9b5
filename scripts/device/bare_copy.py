"""A bare torch peer copy loop: the reference the probe's copy figure is compared with (the
calibration run measured 394 GB/s each way between two H200s).

    python3 scripts/device/bare_copy.py [SIZE] [--all] [--iters N]

Without --all: cuda:0 <-> cuda:1, each way, SIZE bytes (default 1 GiB). With --all: every
ordered pair of the GPUs present, one after the other (scripts/device/check_multigpu.sh runs it at
the probe's size, so each probe cell has its own reference from the same run).
Prints one JSON object: {"bytes", "iters", "A->B": GB/s for each pair, "ok": every copy's
bytes equal, "can_access_peer": bool (0<->1) or {"A->B": bool} (--all)}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # CUDA indices = nvidia-smi's
import torch  # noqa: E402

ITERS = 20  # the probe's on NCCL (gputui/probe/runner.py)


def one_way(src: int, dst: int, size: int, iters: int) -> tuple[float, bool]:
    a = torch.randint(0, 256, (size,), dtype=torch.uint8, device=f"cuda:{src}")
    b = torch.empty(size, dtype=torch.uint8, device=f"cuda:{dst}")
    for _ in range(3):  # warm-up: peer access enabled, clocks up
        b.copy_(a)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    t0 = time.perf_counter()
    for _ in range(iters):
        b.copy_(a)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    dt = time.perf_counter() - t0
    ok = bool(torch.equal(a.cpu(), b.cpu()))
    return size * iters / dt / 1e9, ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("size", nargs="?", type=int, default=2**30, help="bytes per copy")
    ap.add_argument("--all", action="store_true", help="every ordered pair of GPUs")
    ap.add_argument("--iters", type=int, default=ITERS)
    a = ap.parse_args()
    n = torch.cuda.device_count()
    if n < 2:
        print(json.dumps({"error": f"{n} CUDA devices"}))
        return 1
    pairs = [(s, d) for s in range(n) for d in range(n) if s != d] if a.all else [(0, 1), (1, 0)]
    out: dict[str, object] = {"bytes": a.size, "iters": a.iters}
    ok = True
    for s, d in pairs:
        gbps, good = one_way(s, d, a.size, a.iters)
        out[f"{s}->{d}"] = round(gbps, 1)
        ok = ok and good
    out["ok"] = ok
    if a.all:
        out["can_access_peer"] = {
            f"{s}->{d}": torch.cuda.can_device_access_peer(s, d) for s, d in pairs
        }
    else:
        out["can_access_peer"] = torch.cuda.can_device_access_peer(0, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
