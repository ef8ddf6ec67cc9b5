"""A rank its peer waits for, doing one thing for good (bounded by --lifetime): the real
process behind the busy-versus-stuck tests (tests/test_busy_live.py).

Roles:
  checkpoint RATE  save_checkpoint() writes a state file at RATE MB/s (8 MiB rewritten in
                   1 MiB writes, so the disk holds little), as torch.save of a large state
                   dict does, for good
  compile          codegen_kernel_N(): a new generated function every 0.2 s burns the CPU,
                   as an inductor or Triton compile does: its frames never stand still
  stuck            load_next_batch_stuck(): sleeps (a data loader that never returns)
  busyloop         a `while True: pass` in wait_for_flag(): a whole core, one frame
  wait             the peer: sleeps (its GPU spins in the stand-in)
  die              writes PyTorch's `[rank1]:` traceback of an illegal memory access to
                   stderr and exits 1 (a rank gone before gputui starts)
  last-dies        under torchrun: the last rank of the world (RANK = WORLD_SIZE - 1) dies
                   as `die` does (its own rank in the prefix), the others wait

`ready <pid>` is printed on stdout once the role is under way (die: nothing, it exits).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

TRACEBACK = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/job/train.py", line 88, in <module>
[rank1]:     loss = step(batch)
[rank1]:   File "/job/train.py", line 41, in step
[rank1]:     torch.cuda.synchronize()
[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered
[rank1]: CUDA kernel errors might be asynchronously reported at some other API call, so the \
stacktrace below might be incorrect.
"""


def ready() -> None:
    print(f"ready {os.getpid()}", flush=True)


def save_checkpoint(path: str, rate_mb: float) -> None:
    chunk = b"\x5a" * (1 << 20)
    ready()
    with open(path, "wb") as f:
        start, written = time.monotonic(), 0
        while True:
            f.seek((written // len(chunk)) % 8 * len(chunk))
            f.write(chunk)
            f.flush()
            written += len(chunk)
            ahead = written / (rate_mb * 1e6) - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)  # a bounded rate, as a slow file system gives


def compile_graph() -> None:
    ready()
    n = 0
    while True:
        n += 1
        src = f"def codegen_kernel_{n}(until):\n    x = 0\n    while time.monotonic() < until:\n"
        src += f"        x = (x * {n} + 7) % 1000003\n    return x\n"
        scope: dict = {"time": time}
        exec(compile(src, f"<inductor kernel {n}>", "exec"), scope)  # noqa: S102
        scope[f"codegen_kernel_{n}"](time.monotonic() + 0.2)


def load_next_batch_stuck() -> None:
    ready()
    while True:
        time.sleep(1.0)


def wait_for_flag() -> None:
    ready()
    while True:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role")
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--path", default="")
    ap.add_argument("--lifetime", type=int, default=120)
    a = ap.parse_args()
    signal.alarm(a.lifetime)  # never outlives its test
    if a.role == "last-dies":
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        a.role = "die" if rank == world - 1 else "wait"
        if a.role == "die":
            time.sleep(1.0)  # the other agent's ranks are up (a rendezvous completed)
            sys.stderr.write(TRACEBACK.replace("[rank1]", f"[rank{rank}]"))
            sys.stderr.flush()
            sys.exit(1)
    if a.role == "die":
        sys.stderr.write(TRACEBACK)
        sys.stderr.flush()
        sys.exit(1)
    if a.role == "checkpoint":
        save_checkpoint(a.path, a.rate)
    elif a.role == "compile":
        compile_graph()
    elif a.role == "stuck":
        load_next_batch_stuck()
    elif a.role == "busyloop":
        wait_for_flag()
    else:
        ready()
        while True:
            time.sleep(1.0)


if __name__ == "__main__":
    main()
