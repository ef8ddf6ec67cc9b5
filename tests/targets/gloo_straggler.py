"""One rank of a real torch.distributed job (gloo on the CPU) in which one rank is a straggler.

Every step each rank does its own work, then an all_reduce. The rank given `--heavy` does
its work in `heavy_step()`, a CPU-bound Python loop about 20 times longer than the others'
`light_step()`, so the other ranks wait in all_reduce for most of every step: the shape of a
straggler, on the host CPU. `ready <pid>` is printed after the first completed step.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist


def crunch(n: int) -> int:
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def heavy_step() -> int:
    return crunch(400_000)


def light_step() -> int:
    return crunch(20_000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--heavy", action="store_true")
    ap.add_argument("--lifetime", type=float, default=60.0)
    a = ap.parse_args()
    deadline = time.monotonic() + a.lifetime
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.lifetime))
    grad = torch.ones(4)
    step = heavy_step if a.heavy else light_step
    first = True
    while time.monotonic() < deadline:
        step()
        dist.all_reduce(grad)
        if first:
            print(f"ready {os.getpid()}", flush=True)
            first = False
    os._exit(0)  # never wait for the peer at exit


if __name__ == "__main__":
    main()
