"""A rank held back by its input pipeline: each step it sleeps 40 ms in `load_batch()` (a slow
data loader, a read from a slow file system) and computes a few milliseconds in `step()`.
About 90 % of its wall time is in load_batch, asleep; py-spy's default (running samples only)
sees mostly step(). `ready <pid>` is printed after the first step.
"""

from __future__ import annotations

import os
import sys
import time


def load_batch() -> None:
    time.sleep(0.04)


def step() -> int:
    s = 0
    for i in range(30_000):
        s += i * i % 7
    return s


def main() -> None:
    deadline = time.monotonic() + float(sys.argv[1] if len(sys.argv) > 1 else 60)
    first = True
    while time.monotonic() < deadline:
        load_batch()
        step()
        if first:
            print(f"ready {os.getpid()}", flush=True)
            first = False


if __name__ == "__main__":
    main()
