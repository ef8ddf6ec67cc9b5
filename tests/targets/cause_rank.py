"""One rank of a real 2-rank torch.distributed job (gloo on the CPU) whose cause of a hang is
not its main thread's frame: the process behind tests/test_cause_threads.py and the device
check scripts/device/check_cause_threads.sh.

Both ranks initialise the process group and complete one all_reduce; rank 0 then waits in
`train_step`'s all_reduce for rank 1, which plays `role`:

  gil         its side thread `stats` runs parse_record(), a regex that never ends
              (catastrophic backtracking holds the GIL: `re` never lets it go); its main
              thread, in all_reduce when the regex starts, cannot return from it
  poll        poll_ready(): a one-line pure-Python loop polling a flag nobody sets
  loader      a DataLoader (num_workers=2) whose worker 1 blocks in its dataset's
              fetch_record(); the main thread waits in `for batch in loader`
  loader-kill the same, but worker 1 is killed with SIGKILL (as the OOM killer does) inside
              fetch_record(): the rank dies of DataLoader's "killed by signal" error (once
              the file --go names exists, when given: a death while gputui watches)
  checkpoint  save_checkpoint(): torch.save of a 16 MB state dict again and again, at about
              40 MB/s (--path), for good: progress, never a hang

Rank 0 stands in for the peers: when rank 1 dies gloo ends its all_reduce with an error, so
it then waits on, as an NCCL rank would.

`ready <pid>` is printed on stdout once rank 1 stands where the test expects it (rank 0:
once its main thread is inside all_reduce). Bounded by --lifetime (SIGALRM's default action
ends the process even while a thread holds the GIL); a stuck worker leaves when its rank
does.
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

if os.environ.get("GPUTUI_DEVICE") == "cuda":  # the device check: NCCL, one GPU per rank
    DEVICE = f"cuda:{os.environ.get('LOCAL_RANK', '0')}"
else:
    DEVICE = "cpu"


def say_ready() -> None:
    print(f"ready {os.getpid()}", flush=True)


def parse_record(line: str) -> bool:
    return re.match(r"^(\w+\s?)+$", line) is not None  # exponential on a line that ends in "!"


def stats_loop(until_main_in: str, deadline: float) -> None:
    wait_until_main_in(until_main_in, deadline)
    say_ready()
    parse_record("metric_" + "a" * 40 + "!")


def poll_ready(flag: threading.Event) -> None:
    say_ready()
    while not flag.is_set():  # the flag nobody sets
        pass


def wait_until_main_in(function: str, deadline: float) -> None:
    """Return once the main thread's stack holds `function` (bounded by `deadline`)."""
    main = threading.main_thread().ident
    while time.monotonic() < deadline:
        f = sys._current_frames().get(main)
        while f is not None:
            if f.f_code.co_name == function:
                return
            f = f.f_back
        time.sleep(0.005)


class Records(torch.utils.data.Dataset):
    """Eight records; fetching record 1 (worker 1's first) blocks, or kills its worker."""

    def __init__(self, kill: bool, go: str | None = None) -> None:
        self.kill, self.go = kill, go
        self.parent = os.getpid()

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        return fetch_record(i, self.kill, self.parent, self.go)


def fetch_record(i: int, kill: bool, parent: int, go: str | None = None) -> torch.Tensor:
    if i == 1 and kill:
        while go and not os.path.exists(go) and os.getppid() == parent:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
    while i == 1 and os.getppid() == parent:  # a read that never returns
        time.sleep(0.5)
    return torch.full((4,), float(i))


def save_checkpoint(path: str, rate_mb: float) -> None:
    state = {"weight": torch.randn(4 << 20), "step": 812}  # 16 MiB
    say_ready()
    start, written = time.monotonic(), 0
    while True:
        torch.save(state, path)
        written += 16 << 20
        ahead = written / (rate_mb * 1e6) - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)  # a bounded rate, as a shared file system gives


def train_step(grad: torch.Tensor) -> None:
    dist.all_reduce(grad)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=("gil", "poll", "loader", "loader-kill", "checkpoint"))
    ap.add_argument("--lifetime", type=int, default=120)
    ap.add_argument("--path", default="ckpt.pt")
    ap.add_argument("--rate", type=float, default=40.0)
    ap.add_argument("--go", default=None, help="loader-kill: kill the worker once this exists")
    a = ap.parse_args()
    signal.alarm(a.lifetime)
    deadline = time.monotonic() + a.lifetime
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.lifetime))
    rank = dist.get_rank()
    culprit = rank == dist.get_world_size() - 1
    grad = torch.ones(4)
    dist.all_reduce(grad)  # every rank got here: the job works
    if not culprit:
        waiter = threading.Thread(
            target=lambda: (wait_until_main_in("all_reduce", deadline), say_ready()), daemon=True
        )
        waiter.start()
        try:
            while True:
                train_step(grad)
        except RuntimeError:  # gloo ends the collective when its peer dies; NCCL would not:
            while True:  # wait on, as an NCCL rank does until its watchdog ends it
                time.sleep(1.0)
    if a.role == "gil":
        stats = threading.Thread(
            target=stats_loop, args=("all_reduce", deadline), name="stats", daemon=True
        )
        stats.start()
        while True:
            train_step(grad)
    elif a.role == "poll":
        poll_ready(threading.Event())
    elif a.role == "checkpoint":
        save_checkpoint(a.path, a.rate)
    else:
        kill = a.role == "loader-kill"
        loader = torch.utils.data.DataLoader(Records(kill, a.go), batch_size=1, num_workers=2)
        say_ready()
        for batch in loader:
            grad += batch[0]
        train_step(grad)
    os._exit(0)


if __name__ == "__main__":
    main()
