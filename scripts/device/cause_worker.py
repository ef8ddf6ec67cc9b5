"""One rank of a 4-rank job (one rank per GPU, NCCL) for scripts/device/check_cause_deaths.sh.

Every rank does a few all_reduces, prints `READY rank=R pid=P`, waits until the file named by
--go exists (gputui has seen every rank alive by then), prints `ONSET t=UNIX` and then:

  checkpoint  rank 1 writes a big state dict with torch.save (to --dir) while the others wait
              in all_reduce: progress all along, never a hang
  oom         rank 1 asks for 400 GiB: torch.OutOfMemoryError, exit 1 (the others wait)
  logdir      rank 2 raises RuntimeError (its words go to its own log file under torchrun's
              --log-dir); the others wait
  vanish      rank 1 raises RuntimeError under torchrun's default monitor interval: the agent
              ends the others at once
  mismatch    rank 0 enters broadcast, ranks 1-3 all_reduce
  watchdog    rank 3 spins in its own Python loop; ranks 0-2 wait in all_reduce until the
              NCCL watchdog (init_process_group timeout 20 s) ends them

A rank that dies prints `DIE rank=R t=UNIX` just before. With GPUTUI_DEVICE_DRYRUN=1 the job
runs on gloo on the CPU (no CUDA): the same shapes, for a dry run of the script (gloo has no
watchdog: its waiting ranks raise their timeout instead).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

DRY = os.environ.get("GPUTUI_DEVICE_DRYRUN") == "1"


def say(text: str) -> None:
    print(text, flush=True)


def wait_for(path: str, limit: float = 120.0) -> None:
    end = time.monotonic() + limit
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.05)


def save_checkpoint(directory: str, rank: int, gib: float) -> None:
    """A state dict of `gib` GiB written with torch.save, as a trainer's checkpoint is."""
    n = int(gib * (1 << 30) / 4 / 16)
    state = {f"layer{i}.weight": torch.randn(n) for i in range(16)}
    t = time.time()
    torch.save(state, os.path.join(directory, f"ckpt_rank{rank}.pt"))
    say(f"SAVED rank={rank} seconds={time.time() - t:.1f}")


def spin_in_own_code(flags: dict[str, bool]) -> None:
    while not flags.get("go"):
        pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "mode", choices=("checkpoint", "oom", "logdir", "vanish", "mismatch", "watchdog")
    )
    ap.add_argument("--go", required=True)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--gib", type=float, default=0.5 if DRY else 2.0)
    ap.add_argument("--mib", type=int, default=4, help="MiB per collective (4: NCCL's LL/LL128)")
    a = ap.parse_args()
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    timeout = 20 if a.mode == "watchdog" else 120
    if DRY:
        dev = torch.device("cpu")
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    else:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=timeout), device_id=dev)
    x = torch.ones((4 if DRY else a.mib) << 18, device=dev)  # MiB in float32 elements
    for _ in range(3):
        dist.all_reduce(x)
    if not DRY:
        torch.cuda.synchronize()
    say(f"READY rank={rank} pid={os.getpid()}")
    wait_for(a.go)
    say(f"ONSET t={time.time():.3f}")
    if a.mode == "checkpoint" and rank == 1:
        save_checkpoint(a.dir, rank, a.gib)
    elif a.mode == "oom" and rank == 1:
        say(f"DIE rank={rank} t={time.time():.3f}")
        if DRY:
            torch.empty(1 << 45, dtype=torch.uint8)  # the CPU allocator's own refusal
        torch.empty(400 << 30, dtype=torch.uint8, device=dev)
    elif a.mode == "logdir" and rank == 2:
        say(f"DIE rank={rank} t={time.time():.3f}")
        raise RuntimeError("loss is NaN at step 1207 (rank 2's own log file says so)")
    elif a.mode == "vanish" and rank == 1:
        say(f"DIE rank={rank} t={time.time():.3f}")
        raise RuntimeError("loss is NaN at step 1207 (torchrun ends the others at once)")
    elif a.mode == "mismatch" and rank == 0:
        dist.broadcast(x, 0)
    elif a.mode == "watchdog" and rank == 3:
        spin_in_own_code({})
    dist.all_reduce(x)
    if not DRY:
        torch.cuda.synchronize()
    time.sleep(600)  # never reached in a hang; after the checkpoint, stay a job
    return 0


if __name__ == "__main__":
    sys.exit(main())
