"""Host-side facts about processes, through psutil and /proc.

Things that never change for a process (command line, user, environment-derived rank, parent
command) are read once per (pid, create time) and cached; only CPU, RSS and state are read on
every tick. psutil.Process objects are kept between ticks because cpu_percent() measures
the time since its previous call on the same object.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psutil

from gputui.collect.jobs import RANK_ENV_VARS, rank_from_env
from gputui.collect.model import ProcessInfo, RankInfo
from gputui.redact import redact_argv

ENV_DENIED = "environment not readable (permission denied): run gputui as the job's user or root"


@dataclass
class _Static:
    proc: psutil.Process
    create_time: float
    user: str | None
    name: str | None
    cmdline: tuple[str, ...]
    ppid: int | None
    parent_cmd: str | None
    rank: RankInfo | None
    env_error: str | None


class ProcessReader:
    """Reads the processes it is asked about; forgets processes that are gone."""

    def __init__(self) -> None:
        self._cache: dict[int, _Static] = {}

    def _static(self, pid: int) -> _Static | None:
        cached = self._cache.get(pid)
        if cached is not None:
            try:
                if cached.proc.create_time() == cached.create_time:
                    return cached
            except psutil.Error:
                pass
            del self._cache[pid]
        try:
            p = psutil.Process(pid)
            with p.oneshot():
                ct = p.create_time()
                name = p.name()
                ppid = p.ppid()
                try:
                    user: str | None = p.username()
                except (psutil.Error, KeyError):
                    user = None
                try:
                    cmd = tuple(redact_argv(p.cmdline()))  # shown, recorded, bundled
                except psutil.AccessDenied:
                    cmd = ()
        except psutil.Error:
            return None
        rank, env_error = None, None
        try:
            env = p.environ()
            rank = rank_from_env({k: env[k] for k in RANK_ENV_VARS if k in env})
        except psutil.AccessDenied:
            env_error = ENV_DENIED
        except psutil.Error as e:
            env_error = f"environment not readable ({type(e).__name__})"
        parent_cmd = None
        try:
            parent_cmd = " ".join(redact_argv(psutil.Process(ppid).cmdline())) or None
        except psutil.Error:
            pass
        st = _Static(p, ct, user, name, cmd, ppid, parent_cmd, rank, env_error)
        self._cache[pid] = st
        return st

    def read(self, pids: dict[int, tuple[tuple[int, ...], float | None]]) -> list[ProcessInfo]:
        """ProcessInfo for each pid: {pid: (gpu indices, GPU MiB)}.

        A pid NVML reports but the host cannot see (another PID namespace, e.g. gputui inside
        a container that does not share the host's PIDs) is still listed, with a note.
        """
        out = []
        for pid, (gpus, gpu_mem) in pids.items():
            st = self._static(pid)
            if st is None:
                out.append(
                    ProcessInfo(
                        pid=pid,
                        name="(not visible from here: other PID namespace?)",
                        gpus=gpus,
                        gpu_mem_mb=gpu_mem,
                        state="unknown",
                    )
                )
                continue
            try:
                with st.proc.oneshot():
                    cpu = st.proc.cpu_percent(None)
                    rss = st.proc.memory_info().rss / 2**20
                    state = st.proc.status()
            except psutil.Error:
                self._cache.pop(pid, None)
                continue  # exited between NVML's list and now
            out.append(
                ProcessInfo(
                    pid=pid,
                    create_time=st.create_time,
                    user=st.user,
                    name=st.name,
                    cmdline=st.cmdline,
                    state=state,
                    cpu_percent=cpu,
                    rss_mb=rss,
                    ppid=st.ppid,
                    parent_cmd=st.parent_cmd,
                    gpus=gpus,
                    gpu_mem_mb=gpu_mem,
                    rank=st.rank,
                    env_error=st.env_error,
                )
            )
        alive = set(pids)
        for pid in [p for p in self._cache if p not in alive]:
            del self._cache[pid]
        return out


class HostTop:
    """The busiest host processes, for nodes with no GPU to show (like `top`)."""

    def __init__(self, limit: int = 40) -> None:
        self.limit = limit
        self._procs: dict[int, psutil.Process] = {}

    def pids(self) -> list[int]:
        seen: dict[int, psutil.Process] = {}
        usage: list[tuple[float, int]] = []
        for p in psutil.process_iter():
            cached = self._procs.get(p.pid, p)
            try:
                cpu = cached.cpu_percent(None)
            except psutil.Error:
                continue
            seen[p.pid] = cached
            usage.append((cpu, p.pid))
        self._procs = seen
        usage.sort(reverse=True)
        return [pid for _, pid in usage[: self.limit]]


def now() -> float:
    return time.time()
