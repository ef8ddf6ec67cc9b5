"""Which GPUs of this host a job is already using, and which job: the world probe's refusal.

Why: a probe that allocates buffers and runs all_reduce on GPUs a training job holds steals
its memory and bandwidth, and its figures measure the contention, not the link. So the host
side refuses, naming the job, unless the user passes `--force`. Processes of the probe itself
(their command line carries the run's token) are not a job.
"""

from __future__ import annotations

from pathlib import Path

from gputui.collect.procs.jobs import rank_from_env
from gputui.textsafe import clean

MAX_PROC_BYTES = 256 << 10  # /proc/PID/environ and cmdline: bounded reads


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(MAX_PROC_BYTES)
    except OSError:
        return b""


def _describe(pid: int) -> str:
    """'pid 123 (python train.py, job SLURM 4242)': what a person needs to find the job."""
    proc = Path("/proc") / str(pid)
    cmd = _read(proc / "cmdline").replace(b"\0", b" ").decode("utf-8", "replace").strip()
    env: dict[str, str] = {}
    for item in _read(proc / "environ").split(b"\0"):
        k, sep, v = item.decode("utf-8", "replace").partition("=")
        if sep:
            env[k] = v
    info = rank_from_env(env)
    job = ""
    if env.get("SLURM_JOB_ID"):
        job = f", Slurm job {env['SLURM_JOB_ID']}"
    elif info is not None and (info.run_id or info.master):
        job = f", job {info.run_id or info.master}"
    if info is not None and info.rank is not None:
        job += f" rank {info.rank}"
    words = clean(cmd[:80]) if cmd else "?"
    return f"pid {pid} ({words}{clean(job)})"


def busy_gpus(gpus: list[int], token: str) -> dict[int, list[str]]:
    """{GPU index: [who]} for the GPUs among `gpus` that other processes hold ({} when NVML is
    absent: a host without a driver has no GPU to protect)."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError):
        return {}
    out: dict[int, list[str]] = {}
    try:
        for i in gpus:
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                procs = list(pynvml.nvmlDeviceGetComputeRunningProcesses(h) or [])
            except pynvml.NVMLError:
                continue
            for p in procs:
                cmd = _read(Path("/proc") / str(p.pid) / "cmdline")
                if token.encode() in cmd:
                    continue  # one of ours (a rank of this probe, another host sharing a GPU)
                out.setdefault(i, []).append(_describe(int(p.pid)))
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
    return out
