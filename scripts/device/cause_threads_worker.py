"""One rank of scripts/device/check_cause_threads.sh: a hang whose cause is not the main
thread's frame. NCCL, one GPU per rank (LOCAL_RANK); gloo on the CPU with
GPUTUI_DEVICE_DRYRUN=1. Every rank but the last loops all_reduce + synchronize; the last
rank (the culprit) plays MODE:

  gil          its thread `stats` runs parse_record(), a regex that never ends (it holds the
               GIL); its main thread, in torch.cuda.synchronize when it starts, cannot leave
  poll         poll_ready(): a one-line Python loop polling a flag nobody sets
  loader       DataLoader(num_workers=2): worker 1 blocks in the dataset's fetch_record()
  loader-kill  the same, but worker 1 is killed with SIGKILL inside fetch_record() (once the
               file --go names exists, when given; `KILL t=UNIX` is printed then)

--mib sets the all_reduce's size. On 4 x H200, ranks waiting in a 4 MiB all_reduce were
called "busy", not spinning (util ~100 but memory traffic or power above the spin's; likely
NCCL's low-latency protocols, which poll with many threads where the Simple protocol of a
large message polls one flag). The spin the detector is calibrated on is a large
all_reduce's (256 MiB, as scripts/device/multi_worker.py): the script runs both sizes and
records NVML's readings beside them.

Prints `READY rank=R pid=P t=UNIX` once it stands where the check expects it (the culprit
just before its cause starts: the onset). Bounded by --lifetime (SIGALRM's default action
ends it even while a thread holds the GIL).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

CPU = os.environ.get("GPUTUI_DEVICE_DRYRUN") == "1"
# Gloo on the CPU, each rank holding a CUDA context on GPU 0 (NVML lists it there): two
# ranks on a node of one GPU, where NCCL takes one rank per GPU (check_one_gpu_death.sh)
GLOO_ON_GPU = os.environ.get("GPUTUI_GLOO_ON_GPU") == "1"


def ready(rank: int) -> None:
    print(f"READY rank={rank} pid={os.getpid()} t={time.time():.3f}", flush=True)


def parse_record(line: str) -> bool:
    return re.match(r"^(\w+\s?)+$", line) is not None  # exponential on a line ending in "!"


def stats_loop(rank: int, deadline: float) -> None:
    main_in("synchronize" if not CPU else "all_reduce", deadline)
    ready(rank)
    parse_record("metric_" + "a" * 40 + "!")


def poll_ready(rank: int, flag: threading.Event) -> None:
    ready(rank)
    while not flag.is_set():  # the flag nobody sets
        pass


def main_in(function: str, deadline: float) -> None:
    main = threading.main_thread().ident
    while time.monotonic() < deadline:
        f = sys._current_frames().get(main)
        while f is not None:
            if f.f_code.co_name == function:
                return
            f = f.f_back
        time.sleep(0.002)


class Records(torch.utils.data.Dataset):
    def __init__(self, kill: bool, go: str | None) -> None:
        self.kill, self.go, self.parent = kill, go, os.getpid()

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        return fetch_record(i, self.kill, self.parent, self.go)


def fetch_record(i: int, kill: bool, parent: int, go: str | None) -> torch.Tensor:
    if i == 1 and kill:
        while go and not os.path.exists(go) and os.getppid() == parent:
            time.sleep(0.05)
        print(f"KILL pid={os.getpid()} t={time.time():.3f}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    while i == 1 and os.getppid() == parent:  # a read that never returns
        time.sleep(0.5)
    return torch.full((4,), float(i))


def train_step(grad: torch.Tensor) -> None:
    dist.all_reduce(grad)
    if not CPU:
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("gil", "poll", "loader", "loader-kill"))
    ap.add_argument("--lifetime", type=int, default=150)
    ap.add_argument("--go", default=None, help="loader-kill: kill the worker once this exists")
    ap.add_argument("--mib", type=float, default=4.0, help="the all_reduce's size in MiB")
    a = ap.parse_args()
    signal.alarm(a.lifetime)
    deadline = time.monotonic() + a.lifetime
    timeout = datetime.timedelta(seconds=a.lifetime)
    if CPU or GLOO_ON_GPU:
        dist.init_process_group("gloo", timeout=timeout)
        dev = torch.device("cpu")
        if GLOO_ON_GPU:
            held = torch.ones(1 << 20, device="cuda:0")  # noqa: F841 - the GPU 0 context
    else:
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        dist.init_process_group("nccl", timeout=timeout, device_id=dev)
    rank = dist.get_rank()
    grad = torch.ones(max(1, int(a.mib * (1 << 18))), device=dev)  # float32: 4 bytes each
    train_step(grad)  # every rank got here: the job works
    if rank != dist.get_world_size() - 1:
        ready(rank)
        try:
            while True:
                train_step(grad)
        except RuntimeError:  # gloo ends the collective when a peer dies; NCCL does not
            while True:
                time.sleep(1.0)
    if a.mode == "gil":
        threading.Thread(
            target=stats_loop, args=(rank, deadline), name="stats", daemon=True
        ).start()
        while True:
            train_step(grad)
    elif a.mode == "poll":
        poll_ready(rank, threading.Event())
    else:
        loader = torch.utils.data.DataLoader(
            Records(a.mode == "loader-kill", a.go), batch_size=1, num_workers=2
        )
        ready(rank)
        for batch in loader:
            grad += batch[0].sum()
        train_step(grad)
    os._exit(0)


if __name__ == "__main__":
    main()
