"""An N-rank torch.distributed job for scripts/device/check_multigpu.sh (one process per GPU, NCCL)
and, with `--backend gloo`, for tests/test_multi_rank.py on CPU processes.

Modes (rank K is `--odd`, default 3, or the last rank when there are fewer):

  heavy     every rank loops all_reduce of --size bytes (healthy traffic) for LIFETIME s
  stuck     rank K sleeps in load_next_batch_stuck() while the others wait inside all_reduce
  exit      rank K raises in load_next_batch_crashes() and exits with status 3; the others
            wait inside all_reduce for a peer that is gone
  mismatch  rank K calls broadcast while the others call all_reduce, step after step. gloo
            blocks every rank in its own collective (seen here). NCCL does not check that
            ranks run the same collective, so what happens is NCCL's undefined behaviour;
            the issue expects every GPU to spin, and check_multigpu.sh records what NVML
            and the stacks show

Usage:
  torchrun --nproc-per-node N scripts/device/multi_worker.py MODE LIFETIME [--odd K] [--onset S] ...
  python3 scripts/device/multi_worker.py --spawn N MODE LIFETIME [...]

`--share-gpu` (NCCL, with --spawn) puts every rank on GPU 0 of a one-GPU machine and gives
each rank its own NCCL_HOSTID, so NCCL takes every rank for a node of its own and connects
them over sockets on loopback (NCCL_SOCKET_IFNAME=lo): two ranks on one GPU are refused as
"Duplicate GPU detected" otherwise. It is how a 2-node NCCL job, its hang and its RAS/flight
recorder are seen on a machine with one GPU; NVML then sees one GPU for the whole job.

`--spawn N` starts the N ranks itself, with no elastic agent watching them: needed for
`exit`, because torchrun's agent would kill the other ranks as soon as rank K fails, and the
hang would never last long enough to be seen. The ranks share the launcher's process group,
so `kill -- -PGID` ends them all.

Every rank runs healthy steps (all_reduce, then synchronize on NCCL) for --onset seconds
after READY; the ranks agree on the step where that time is up (a MAX all_reduce of a flag
every few steps), so the onset is one step for all of them. Then rank K diverges. Lines on
stdout, each one write(2) (ranks share the stream, so lines never interleave):

  READY rank=R pid=P mode=M world=N backend=B   the process group works
  ONSET rank=K pid=P step=S t=UNIX mode=M       rank K diverges now (t: time.time())
  IN rank=R pid=P fn=F step=S                   R's main thread stands in F after the onset
                                                (seen from a helper thread, so a test never
                                                dumps a rank before it got there; F is
                                                all_reduce or broadcast on gloo, synchronize
                                                on NCCL, where collectives return at once)
  ERROR rank=R pid=P t=UNIX TYPE: MESSAGE       R raised (its traceback is on stderr)
  DONE rank=R steps=S                           heavy: the lifetime is over
  DEBUGSERVER rank=R pid=P port=N               --debug-server: PyTorch's debug server is up
                                                (absent=... when this torch has none)

A rank blocked inside a collective cannot return to Python, so SIGALRM (its default action
ends the process, no Python handler needed) bounds every rank at LIFETIME + 30 s, init
included; the process group's own timeout is later still, so it never fires first.
NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 are set in
every rank (NVLink multicast must stay off on the lent machines).
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # rank r on cuda:r is NVML's GPU r (the detector's)
}
os.environ.update(SAFE_ENV)  # before torch is imported, in the launcher and in every rank

MODES = ("heavy", "stuck", "exit", "mismatch")
CHECK_EVERY = 10  # healthy steps between the agreements on "is the onset time up?"


def say(text: str) -> None:
    os.write(1, (text + "\n").encode())


# ---------------------------------------------------------------- launcher


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(n: int, argv: list[str]) -> int:
    """Start ranks 0..n-1 directly (no agent watching them) and wait for all of them."""
    port = str(free_port())
    procs = []
    for rank in range(n):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(n),
            "LOCAL_WORLD_SIZE": str(n),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        }
        if "--share-gpu" in argv:
            env.update(
                NCCL_HOSTID=f"multi-worker-node{rank}",
                NCCL_SOCKET_IFNAME="lo",
                NCCL_IB_DISABLE="1",
            )
        cmd = [sys.executable, os.path.abspath(__file__), *argv]
        procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL))  # noqa: S603
    codes = [p.wait() for p in procs]  # each rank is bounded by its own SIGALRM
    say(f"spawned ranks exited: {codes}")
    return 0


# ---------------------------------------------------------------- what each rank does


class Job:
    def __init__(self, a: argparse.Namespace) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.a = torch, dist, a
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.nccl = a.backend == "nccl"
        timeout = datetime.timedelta(seconds=a.lifetime + 120)
        if self.nccl:
            local = 0 if a.share_gpu else int(os.environ.get("LOCAL_RANK", self.rank))
            torch.cuda.set_device(local)
            self.device = torch.device("cuda", local)
            try:
                dist.init_process_group("nccl", timeout=timeout, device_id=self.device)
            except TypeError:  # an older torch without device_id
                dist.init_process_group("nccl", timeout=timeout)
        else:
            torch.set_num_threads(1)
            self.device = torch.device("cpu")
            dist.init_process_group("gloo", timeout=timeout)
        size = a.size or (256 << 20 if self.nccl else 64 << 10)
        self.x = torch.ones(max(1, size // 4), dtype=torch.float32, device=self.device)
        # A healthy NCCL step computes before it communicates, as training does: without the
        # matmuls a rank spends its step waiting in the collective's kernel, which NVML sees
        # as a spin (util ~100%, idle power) even while the job makes progress.
        self.w = (
            torch.randn(4096, 4096, dtype=torch.bfloat16, device=self.device)
            if self.nccl and not getattr(a, "comm_only", False)
            else None
        )
        self.step = 0

    def sync(self) -> None:
        if self.nccl:
            self.torch.cuda.synchronize()

    def onset_now(self, past_deadline: bool) -> bool:
        """Whether any rank's onset time is up: one answer for all ranks (MAX all_reduce)."""
        flag = self.torch.tensor([1.0 if past_deadline else 0.0], device=self.device)
        self.dist.all_reduce(flag, op=self.dist.ReduceOp.MAX)
        return bool(flag.item() > 0)

    def healthy(self, seconds: float) -> None:
        """Healthy steps until the ranks agree that `seconds` are over."""
        end, first = time.monotonic() + seconds, self.step
        while True:  # every rank enters at the same step, so they check at the same steps
            if (self.step - first) % CHECK_EVERY == 0 and self.onset_now(time.monotonic() >= end):
                return
            train_step(self)


def train_step(job: Job) -> None:
    if job.w is not None:
        for _ in range(4):
            job.w @ job.w
    job.dist.all_reduce(job.x)
    job.sync()
    job.step += 1


def broadcast_step(job: Job) -> None:
    job.dist.broadcast(job.x, src=0)
    job.sync()
    job.step += 1


def load_next_batch_stuck(job: Job, deadline: float) -> None:
    onset(job)
    say(f"IN rank={job.rank} pid={os.getpid()} fn=load_next_batch_stuck step={job.step}")
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(1.0, left))


def load_next_batch_crashes(job: Job) -> None:
    onset(job)
    raise RuntimeError(f"rank {job.rank}: shard 17 is corrupt (injected by multi_worker.py)")


def onset(job: Job) -> None:
    t = time.time()
    say(f"ONSET rank={job.rank} pid={os.getpid()} step={job.step} t={t:.3f} mode={job.a.mode}")


def announce_when_in(job: Job, function: str, deadline: float) -> None:
    """Say IN once the main thread's stack holds `function` (bounded by `deadline`).

    Started only after the onset, so any frame it sees is the post-onset call. gloo
    releases the GIL while it waits, so this thread runs; on NCCL the wait is in
    torch.cuda.synchronize, which releases it too.
    """
    main = threading.main_thread().ident
    while time.monotonic() < deadline:
        f = sys._current_frames().get(main)
        while f is not None:
            if f.f_code.co_name == function:
                say(f"IN rank={job.rank} pid={os.getpid()} fn={function} step={job.step}")
                return
            f = f.f_back
        time.sleep(0.005)


def start_debug_server(job: Job) -> None:
    """PyTorch's debug server (torch 2.10+), when --debug-server asks for it: every rank's
    worker server, and rank 0's front end on that port (its periodic dumps with
    --debug-dump-dir). A torch without it, or without dump_dir, says so and goes on."""
    a = job.a
    try:
        import inspect

        from torch.distributed.debug import start_debug_server as start
    except ImportError as e:
        say(f"DEBUGSERVER rank={job.rank} absent=torch.distributed.debug ({type(e).__name__})")
        return
    kw: dict[str, object] = {"port": a.debug_server}
    params = inspect.signature(start).parameters
    if a.debug_dump_dir:
        if "dump_dir" in params:
            kw.update(dump_dir=a.debug_dump_dir, dump_interval=a.debug_dump_interval)
        else:
            say(f"DEBUGSERVER rank={job.rank} no_dump_dir=1 (this torch has no dump_dir)")
    if "start_method" in params:  # the front end must not fork a process that holds CUDA
        kw["start_method"] = "spawn" if job.nccl else "fork"
    start(**kw)
    say(f"DEBUGSERVER rank={job.rank} pid={os.getpid()} port={a.debug_server}")


def run_rank(a: argparse.Namespace) -> int:
    signal.alarm(int(a.lifetime) + 30)
    deadline = time.monotonic() + a.lifetime
    job = Job(a)
    if a.debug_server:
        start_debug_server(job)
    for _ in range(3):  # a few healthy steps first: the communicators are up
        train_step(job)
    say(
        f"READY rank={job.rank} pid={os.getpid()} mode={a.mode} world={job.world} "
        f"backend={a.backend}"
    )
    odd = odd_rank(a, job.world)
    if a.mode == "heavy":
        job.healthy(max(0.0, deadline - time.monotonic()))
        job.sync()
        say(f"DONE rank={job.rank} steps={job.step}")
        os._exit(0)
    job.healthy(a.onset)
    try:
        if job.rank == odd and a.mode == "stuck":
            load_next_batch_stuck(job, deadline)
        elif job.rank == odd and a.mode == "exit":
            load_next_batch_crashes(job)
        else:
            mine = a.mode == "mismatch" and job.rank == odd
            if mine:
                onset(job)
            fn = "synchronize" if job.nccl else ("broadcast" if mine else "all_reduce")
            args = (job, fn, deadline)
            threading.Thread(target=announce_when_in, args=args, daemon=True).start()
            step = broadcast_step if mine else train_step
            while time.monotonic() < deadline:  # blocks in the first step on a real hang
                step(job)
    except Exception as e:  # a crash as a real job shows it, then out without NCCL teardown
        traceback.print_exc()
        t = time.time()
        err = f"{type(e).__name__}: {str(e)[:200]}"
        say(f"ERROR rank={job.rank} pid={os.getpid()} t={t:.3f} {err}")
        os._exit(3 if job.rank == odd else 1)
    os._exit(0)


def odd_rank(a: argparse.Namespace, world: int) -> int:
    return a.odd if a.odd is not None else min(3, world - 1)


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spawn", type=int, metavar="N", help="start N ranks without torchrun")
    ap.add_argument("mode", choices=MODES)
    ap.add_argument("lifetime", type=float, help="seconds each rank lives (SIGALRM at +30 s)")
    ap.add_argument("--odd", type=int, default=None, help="the rank that diverges (default 3)")
    ap.add_argument("--onset", type=float, default=0.0, help="healthy seconds after READY")
    ap.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    ap.add_argument("--size", type=int, default=None, help="bytes per collective")
    ap.add_argument("--share-gpu", action="store_true", help="every rank on GPU 0 (see above)")
    ap.add_argument(
        "--comm-only",
        action="store_true",
        help="no matmuls in a step: an NCCL-only benchmark, which NVML sees as a spin",
    )
    ap.add_argument(
        "--debug-server",
        type=int,
        default=0,
        metavar="PORT",
        help="start PyTorch's debug server, its front end on PORT (rank 0)",
    )
    ap.add_argument("--debug-dump-dir", default=None, metavar="DIR", help="its periodic dumps")
    ap.add_argument("--debug-dump-interval", type=float, default=5.0, metavar="S")
    return ap.parse_args(argv)


def rank_argv(a: argparse.Namespace) -> list[str]:
    """The arguments each spawned rank gets: the launcher's, without --spawn."""
    argv = [a.mode, f"{a.lifetime:g}", "--onset", f"{a.onset:g}", "--backend", a.backend]
    if a.odd is not None:
        argv += ["--odd", str(a.odd)]
    if a.size is not None:
        argv += ["--size", str(a.size)]
    if a.share_gpu:
        argv.append("--share-gpu")
    if a.comm_only:
        argv.append("--comm-only")
    if a.debug_server:
        argv += ["--debug-server", str(a.debug_server)]
    if a.debug_dump_dir:
        argv += ["--debug-dump-dir", a.debug_dump_dir]
        argv += ["--debug-dump-interval", f"{a.debug_dump_interval:g}"]
    return argv


def main() -> int:
    a = parse(sys.argv[1:])
    world = a.spawn if a.spawn is not None else int(os.environ.get("WORLD_SIZE", "0"))
    if a.spawn is None and "RANK" not in os.environ:
        why = "no RANK: run it under torchrun, or with --spawn N"
    elif world < 2:
        why = f"a job needs at least 2 ranks (got {world})"
    elif not 0 <= odd_rank(a, world) < world:
        why = f"--odd {a.odd}: the ranks are 0-{world - 1}"
    else:
        return spawn(a.spawn, rank_argv(a)) if a.spawn is not None else run_rank(a)
    print(f"multi_worker.py: {why}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
