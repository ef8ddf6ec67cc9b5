"""A two-rank NCCL job for scripts/device/check_detector.sh, in one of four modes.

  heavy  back-to-back all_reduce of 256 MiB (healthy: high util at modest power)
  idle   each rank holds 4 GiB and sleeps (an idle inference server: not a hang)
  hang   rank 1 sleeps in a "data loader" while rank 0 waits inside all_reduce
  die    rank 1 exits with status 3 while rank 0 waits inside all_reduce

Usage:
  torchrun --nproc-per-node 2 scripts/device/hang_worker.py MODE LIFETIME
  python3 scripts/device/hang_worker.py --spawn MODE LIFETIME

--spawn starts the two ranks itself, as the calibration run did. Use it for `die`: under
torchrun the elastic agent sees rank 1 fail and kills rank 0 within seconds, so the hang
would never last long enough to detect.

Each rank prints "READY rank=R pid=P mode=M" once NCCL works, then runs MODE for LIFETIME
seconds and exits. A rank stuck inside a collective cannot return to Python, so SIGALRM
(its default action ends the process, no Python handler needed) bounds every rank at
LIFETIME + 30 s, init included.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import time

MODES = ("heavy", "idle", "hang", "die")


def spawn(mode: str, lifetime: str) -> int:
    """Launch rank 0 and rank 1 directly (no agent watching them) and wait for both."""
    port = str(29400 + os.getpid() % 500)
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
        }
        procs.append(subprocess.Popen([sys.executable, __file__, mode, lifetime], env=env))  # noqa: S603
    codes = [p.wait() for p in procs]
    print(f"spawned ranks exited: {codes}", flush=True)
    return 0


def rank_main(mode: str, lifetime: float) -> None:
    import torch
    import torch.distributed as dist

    signal.alarm(int(lifetime) + 30)
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group(
        "nccl",
        timeout=datetime.timedelta(seconds=lifetime + 60),  # never fires while we watch
        device_id=torch.device("cuda", local),
    )
    x = torch.ones(64 << 20, device="cuda")  # 256 MiB of float32
    for _ in range(3):  # a few healthy steps first, as a real job would have done
        dist.all_reduce(x)
    torch.cuda.synchronize()
    print(f"READY rank={rank} pid={os.getpid()} mode={mode}", flush=True)
    end = time.monotonic() + lifetime
    if mode == "heavy":
        while time.monotonic() < end:
            for _ in range(10):
                dist.all_reduce(x)
            torch.cuda.synchronize()
    elif mode == "idle":
        hold = torch.empty(1 << 30, dtype=torch.float32, device="cuda")  # 4 GiB
        hold.fill_(1)
        torch.cuda.synchronize()
        time.sleep(max(0.0, end - time.monotonic()))
    elif rank == 1 and mode == "die":
        print("rank 1 exiting abruptly", flush=True)
        os._exit(3)
    elif rank == 1:  # hang: a stuck data loader
        time.sleep(max(0.0, end - time.monotonic()))
    else:  # rank 0 in hang and die: waits for a peer that never comes
        dist.all_reduce(x)
        torch.cuda.synchronize()  # returns only if rank 1 joins; SIGALRM ends it otherwise
    os._exit(0)


def main() -> int:
    args = sys.argv[1:]
    spawned = args[:1] == ["--spawn"]
    if spawned:
        args = args[1:]
    if len(args) != 2 or args[0] not in MODES:
        print(__doc__, file=sys.stderr)
        return 2
    if spawned:
        return spawn(args[0], args[1])
    rank_main(args[0], float(args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
