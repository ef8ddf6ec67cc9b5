"""A process for the tools tests to attach to: it blocks in a function with a known name.

It prints `ready <pid>` on stdout once it is inside that function (and its extra threads
are running), so a test can wait on the pipe instead of sleeping. It exits by itself after
--lifetime seconds, so a crashed test never leaves it behind for long.

Roles:
  loader            waits in wait_for_the_data_loader (the stuck rank of a hang)
  allreduce         waits in all_reduce (a healthy rank waiting for its peers)
  broadcast         waits in broadcast (a rank that entered another collective than its peers)
  exit-when-traced  exits with status 7 as soon as a tracer (strace) attaches
"""

from __future__ import annotations

import argparse
import ctypes
import os
import threading
import time


def say_ready() -> None:
    print(f"ready {os.getpid()}", flush=True)


def wait_for_the_data_loader(deadline: float, tick: float) -> None:
    say_ready()
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(tick, left))


def all_reduce(deadline: float, tick: float) -> None:
    say_ready()
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(tick, left))


def broadcast(deadline: float, tick: float) -> None:
    say_ready()
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(tick, left))


def _traced() -> bool:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("TracerPid:"):
                return line.split()[1] != "0"
    return False


def exit_when_traced(deadline: float, tick: float) -> None:
    say_ready()
    while time.monotonic() < deadline:
        if _traced():
            os._exit(7)
        time.sleep(0.001)


def spin_in_worker_thread(started: threading.Barrier, stop: threading.Event) -> None:
    started.wait()
    stop.wait()


ROLES = {"loader": wait_for_the_data_loader, "allreduce": all_reduce, "broadcast": broadcast}
ROLES["exit-when-traced"] = exit_when_traced


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=sorted(ROLES), default="loader")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--tick", type=float, default=None, help="seconds per sleep (default: all)")
    ap.add_argument("--lifetime", type=float, default=120.0)
    ap.add_argument("--undumpable", action="store_true", help="prctl(PR_SET_DUMPABLE, 0)")
    ap.add_argument("--load", action="append", default=[], help="dlopen this shared library")
    a, _rest = ap.parse_known_args()  # extra arguments: e.g. secrets on the command line
    if a.undumpable:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    for lib in a.load:
        ctypes.CDLL(lib)  # shows in /proc/PID/maps like a CUDA/NCCL library would
    stop = threading.Event()
    started = threading.Barrier(a.threads + 1)
    for i in range(a.threads):
        threading.Thread(
            target=spin_in_worker_thread, args=(started, stop), name=f"worker-{i}", daemon=True
        ).start()
    started.wait()
    deadline = time.monotonic() + a.lifetime
    ROLES[a.role](deadline, a.tick or a.lifetime)


if __name__ == "__main__":
    main()
