"""An N-rank NCCL training job, one rank per GPU, for the 4-GPU device checks.

Each step a rank runs `base` bf16 8192^3 matmuls (times its own ratio), then an all_reduce of
128 MiB, then synchronizes: the shape of data-parallel training. What makes it interesting:

  --ratio R:X        rank R does X times the matmuls of the others (a straggler: 2.5, 1.5)
  --input-sleep R:S  rank R sleeps S seconds in load_batch() before each step (a rank held
                     back by its input pipeline: its GPU idles, the others wait for it)
  --checkpoint R:GB:EVERY  every EVERY seconds rank R writes a GB-GiB state dict with
                     torch.save in save_checkpoint() while the others wait in all_reduce
                     (a checkpoint, not a hang: its CPU time and write bytes advance)
  --stuck R:AFTER    AFTER seconds in, rank R sleeps in load_next_batch_stuck() for good
                     (the control: a rank that does not advance)
  --output FILE      every rank appends its stdout and stderr to one file (as `srun -o`)
  --die R:AFTER:HOW  AFTER seconds in, rank R dies: HOW = raise (a Python error printed with
                     PyTorch's `[rankN]:` prefix), xid (an illegal memory access from a
                     Triton out-of-bounds store: a real Xid 31) or ddp (every rank trains a
                     small DDP model; rank R skips a layer, and DDP raises "Expected to have
                     finished reduction in the prior iteration"), while the others wait

Usage: python3 scripts/device/rank_worker.py --world N --seconds S [options]   (spawns N ranks)
   or: torchrun ... scripts/device/rank_worker.py --seconds S [options]   (each rank from its
       RANK and LOCAL_RANK: the GPU is LOCAL_RANK, as torchrun's agents give them)
Lines: READY rank=R pid=P, PHASE rank=R pid=P what=W t=UNIX, DONE rank=R steps=S. Every rank
is bounded by SIGALRM at S + 30 s. NVLink multicast stays off (NCCL_NVLS_ENABLE=0 ...).
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import socket
import subprocess
import sys
import time

SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
}
os.environ.update(SAFE_ENV)


def say(text: str) -> None:
    os.write(1, (text + "\n").encode())


def pair(text: str, kinds: tuple[type, ...]) -> tuple:
    parts = text.split(":")
    if len(parts) != len(kinds):
        raise argparse.ArgumentTypeError(f"{text!r}: want {len(kinds)} fields separated by ':'")
    return tuple(k(p) for k, p in zip(kinds, parts, strict=True))


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--base", type=int, default=2, help="matmuls per step of an ordinary rank")
    ap.add_argument("--ratio", type=lambda t: pair(t, (int, float)))
    ap.add_argument("--input-sleep", type=lambda t: pair(t, (int, float)))
    ap.add_argument("--checkpoint", type=lambda t: pair(t, (int, float, float)))
    ap.add_argument("--stuck", type=lambda t: pair(t, (int, float)))
    ap.add_argument("--die", type=lambda t: pair(t, (int, float, str)))
    ap.add_argument("--ckpt-dir", default="/tmp/gputui-ckpt")
    ap.add_argument("--output", default=None)
    ap.add_argument("--cpu", action="store_true", help="gloo on CPU, small matmuls: a dry run")
    ap.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.rank is None and "TORCHELASTIC_RUN_ID" in os.environ:  # started by torchrun
        a.rank = int(os.environ["RANK"])
    return a


def spawn(a: argparse.Namespace, argv: list[str]) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    out = open(a.output, "ab") if a.output else None  # noqa: SIM115 - the ranks share it
    procs = []
    for rank in range(a.world):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(a.world),
            "LOCAL_WORLD_SIZE": str(a.world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "OMP_NUM_THREADS": "1",
            "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": os.environ.get(
                "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", ""
            ),
        }
        if not env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"]:
            del env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"]
        cmd = [sys.executable, os.path.abspath(__file__), *argv, "--rank", str(rank)]
        procs.append(
            subprocess.Popen(  # noqa: S603
                cmd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out if out else None,
                stderr=out if out else None,
            )
        )
    codes = [p.wait() for p in procs]
    say(f"ranks exited: {codes}")
    return 0


def load_batch(seconds: float) -> None:
    time.sleep(seconds)


def load_next_batch_stuck(until: float) -> None:
    while (left := until - time.monotonic()) > 0:
        time.sleep(min(1.0, left))


def save_checkpoint(torch, state: dict, path: str) -> None:
    torch.save(state, path)
    os.sync()


def two_layers(torch):
    """A small model whose forward can leave its second layer out: then that layer's
    gradient never arrives, DDP's reduction never finishes, and the next forward raises."""

    class TwoLayers(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)

        def forward(self, x, skip: bool = False):
            x = self.a(x)
            return x if skip else self.b(x)

    return TwoLayers()


def illegal_access() -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def store_far(p):
        tl.store(p + (1 << 40), 1.0)

    x = torch.zeros(1, device="cuda")
    store_far[(1,)](x)
    torch.cuda.synchronize()


def rank_main(a: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    signal.alarm(int(a.seconds) + 30)
    rank = a.rank
    local = int(os.environ.get("LOCAL_RANK", rank))  # the GPU (torchrun: per agent)
    timeout = datetime.timedelta(seconds=a.seconds + 120)
    if a.cpu:
        dev = "cpu"
        dist.init_process_group("gloo", timeout=timeout)
        w = torch.randn(256, 256)
        grad = torch.ones(1 << 16)
    else:
        dev = "cuda"
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", timeout=timeout, device_id=torch.device("cuda", local))
        w = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        grad = torch.ones((128 << 20) // 4, device="cuda")
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    dist.all_reduce(grad)
    sync()
    k = a.base
    if a.ratio and a.ratio[0] == rank:
        k = max(1, round(a.base * a.ratio[1]))
    sleep = a.input_sleep[1] if a.input_sleep and a.input_sleep[0] == rank else 0.0
    ckpt = a.checkpoint if a.checkpoint and a.checkpoint[0] == rank else None
    stuck = a.stuck if a.stuck and a.stuck[0] == rank else None
    die = a.die if a.die and a.die[0] == rank else None
    state = None
    if ckpt:
        n = int(ckpt[1] * (1 << 30)) // 4
        state = {"weights": torch.ones(n, device="cpu"), "step": 0}  # ones: made in seconds
        os.makedirs(a.ckpt_dir, exist_ok=True)
    ddp = None
    if a.die and a.die[2] == "ddp":
        model = two_layers(torch).to(dev)
        ids = [local] if dev == "cuda" else None
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        inp = torch.randn(8, 64, device=dev)
    say(f"READY rank={rank} pid={os.getpid()} matmuls={k} sleep={sleep}")
    t0 = time.monotonic()
    last_ckpt = t0
    steps = 0
    while time.monotonic() - t0 < a.seconds:
        if sleep:
            load_batch(sleep)
        if stuck and time.monotonic() - t0 >= stuck[1]:
            say(f"PHASE rank={rank} pid={os.getpid()} what=stuck t={time.time():.3f}")
            load_next_batch_stuck(t0 + a.seconds)
            break
        if die and time.monotonic() - t0 >= die[1]:
            say(f"PHASE rank={rank} pid={os.getpid()} what=die-{die[2]} t={time.time():.3f}")
            if die[2] == "xid":
                illegal_access()
            if die[2] == "ddp":
                for _ in range(2):  # the first skips a layer; the second raises in forward
                    ddp(inp, skip=True).sum().backward()
            raise RuntimeError(f"rank {rank}: shard 17 is corrupt (injected by rank_worker.py)")
        if ckpt and time.monotonic() - last_ckpt >= ckpt[2]:
            t = time.time()
            say(f"PHASE rank={rank} pid={os.getpid()} what=checkpoint t={t:.3f}")
            state["step"] = steps
            save_checkpoint(torch, state, os.path.join(a.ckpt_dir, f"ckpt-rank{rank}.pt"))
            say(f"PHASE rank={rank} pid={os.getpid()} what=checkpoint-done t={time.time():.3f}")
            last_ckpt = time.monotonic()
        for _ in range(k):
            w @ w
        if ddp is not None:
            ddp(inp).sum().backward()
        dist.all_reduce(grad)
        sync()
        steps += 1
    say(f"DONE rank={rank} steps={steps}")
    os._exit(0)  # no NCCL teardown: a peer may be gone


def main() -> int:
    argv = sys.argv[1:]
    a = parse(argv)
    if a.rank is not None:
        try:
            rank_main(a)
        except Exception as e:
            import traceback

            # The check's own line first: the traceback is the rank's last words in the file
            say(f"ERROR rank={a.rank} pid={os.getpid()} {type(e).__name__}: {str(e)[:200]}")
            # PyTorch's elastic agent prefixes each line with [rankN]:, as a user sees it
            for line in traceback.format_exc().splitlines():
                sys.stderr.write(f"[rank{a.rank}]: {line}\n")
            sys.stderr.flush()
            os._exit(3)
        return 0
    return spawn(a, argv)


if __name__ == "__main__":
    sys.exit(main())
