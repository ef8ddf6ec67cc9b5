"""One rank of a real 2-rank torch.distributed job (gloo on the CPU) that hangs like the H200 one.

Both ranks initialise the process group and complete one all_reduce. Then the rank given
`--stuck` calls `load_next_batch_stuck()` (a data loader that never returns) while the other
calls `train_step()`, which enters `dist.all_reduce` and waits there for its peer: the real
torch frames a person would see on a GPU node, minus the GPU.

`ready <pid>` is printed once the rank stands where the test expects it: the stuck rank from
inside its function; the waiting rank from a helper thread that watches the main thread's
Python frames until `all_reduce` is on them (gloo releases the GIL while it waits), so a test
never dumps a rank before it got there.
"""

from __future__ import annotations

import argparse
import datetime
import os
import threading
import time

import torch
import torch.distributed as dist
from main_thread import announce_when_in


def say_ready() -> None:
    print(f"ready {os.getpid()}", flush=True)


def load_next_batch_stuck(deadline: float) -> None:
    say_ready()
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(1.0, left))


def train_step(grad: torch.Tensor) -> None:
    dist.all_reduce(grad)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stuck", action="store_true")
    ap.add_argument("--lifetime", type=float, default=120.0)
    a = ap.parse_args()
    deadline = time.monotonic() + a.lifetime
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.lifetime))
    grad = torch.ones(4)
    dist.all_reduce(grad)  # both ranks got here: the job works
    if a.stuck:
        load_next_batch_stuck(deadline)
    else:
        threading.Thread(
            target=announce_when_in, args=("all_reduce", deadline), daemon=True
        ).start()
        train_step(grad)
    os._exit(0)  # never wait for the peer at exit


if __name__ == "__main__":
    main()
