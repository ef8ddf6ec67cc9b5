"""One rank of a real 2-rank gloo job whose ranks enter different collectives.

Both ranks initialise the process group and complete one all_reduce. Then rank 0 calls
`send_weights()` (a `dist.broadcast`) and rank 1 calls `train_step()` (a `dist.all_reduce`):
on gloo both block until the process group's timeout, as NCCL ranks hang on the GPU. `ready
<pid>` is printed once the main thread stands in its collective (a helper thread watches its
frames), so a test never looks before it got there.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
from main_thread import announce_when_in


def send_weights(t: torch.Tensor) -> None:
    dist.broadcast(t, 0)


def train_step(t: torch.Tensor) -> None:
    dist.all_reduce(t)


def main() -> None:
    lifetime = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=lifetime))
    t = torch.ones(4)
    dist.all_reduce(t)  # the job works
    op = "broadcast" if dist.get_rank() == 0 else "all_reduce"
    deadline = time.monotonic() + lifetime
    threading.Thread(target=announce_when_in, args=(op, deadline), daemon=True).start()
    try:
        (send_weights if dist.get_rank() == 0 else train_step)(t)
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()
