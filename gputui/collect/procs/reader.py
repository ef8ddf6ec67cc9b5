"""Host-side facts about processes, through psutil and /proc.

Things that never change for a process (command line, user, environment-derived rank, parent
command) are read once per (pid, create time) and cached; only CPU, RSS and state are read on
every tick. psutil.Process objects are kept between ticks because cpu_percent() measures
the time since its previous call on the same object: the first call on a process has no
interval to measure, so its CPU% is reported as unknown (None), never as a made-up 0.0.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from gputui.collect.model import ProcessInfo, RankInfo
from gputui.collect.procs.jobs import RANK_ENV_VARS, rank_from_env
from gputui.collect.procs.owner import Owner, read_owner
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
    owner: Owner | None = None
    cpu_started: bool = False  # cpu_percent() has been called once: the next call measures


def exe_name(p: psutil.Process) -> tuple[str, ...]:
    """The basename of the process's executable (/proc/PID/exe), when it can be read: with
    comm, what names a tool whose argv[0] was set to something else (`exec -a python
    redis-cli -a X`).

    Args:
        p: the psutil process.

    Returns:
        (basename,) of /proc/PID/exe, or () when it cannot be read.
    """
    try:
        exe = p.exe()
    except (psutil.Error, OSError):
        return ()
    return (os.path.basename(exe),) if exe else ()


def command_of(pid: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A process's argv and the names of its executable (comm, exe's basename), unredacted,
    for redacting what a tool prints of it (py-spy's header); empty when unreadable.

    Args:
        pid: the process.

    Returns:
        (argv, names of its executable), both empty when it cannot be read.
    """
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            argv = tuple(p.cmdline())
            names = (p.name(), *exe_name(p))
    except (psutil.Error, OSError):
        return (), ()
    return argv, names


class ProcessReader:
    """Reads the processes it is asked about; forgets processes that are gone."""

    def __init__(self) -> None:
        self._cache: dict[int, _Static] = {}
        # Pids read here alive that have exited since, while NVML still lists them (it
        # drops a pid a moment after the process; a stand-in may never): not "another PID
        # namespace", and not a process to show. Forgotten once NVML stops listing them.
        self._exited: set[int] = set()

    def _static(self, pid: int) -> _Static | None:
        cached = self._cache.get(pid)
        if cached is not None:
            try:
                if cached.proc.create_time() == cached.create_time:
                    return cached
            except psutil.Error:
                self._exited.add(pid)
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
                try:  # shown, recorded, bundled; the tool known by comm or exe (exec -a)
                    cmd = tuple(redact_argv(p.cmdline(), (name, *exe_name(p))))
                except psutil.AccessDenied:
                    cmd = ()
        except psutil.Error:
            return None
        self._exited.discard(pid)  # a process with this pid lives: a new one
        rank, env_error, env = None, None, None
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
        owner = read_owner(pid, env)
        st = _Static(p, ct, user, name, cmd, ppid, parent_cmd, rank, env_error, owner)
        self._cache[pid] = st
        return st

    def read(
        self,
        pids: dict[int, tuple[tuple[int, ...], float | None]],
        cpu: dict[int, float] | None = None,
    ) -> list[ProcessInfo]:
        """ProcessInfo for each pid: {pid: (gpu indices, GPU MiB)}, in the order given.

        `cpu` holds CPU% already measured elsewhere (HostTop measures every process to pick
        the busiest); those pids are not measured again. Others get CPU% since this reader's
        previous call for them, or None on the first.

        A pid NVML reports but the host cannot see (another PID namespace, e.g. gputui inside
        a container that does not share the host's PIDs) is still listed, with a note.
        """
        cpu = cpu or {}
        out = []
        for pid, (gpus, gpu_mem) in pids.items():
            st = self._static(pid)
            if st is None and pid in self._exited:
                continue  # read here alive before: it exited, NVML lists it a moment longer
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
                    pct: float | None = cpu.get(pid)
                    if pct is None:
                        since_last = st.proc.cpu_percent(None)  # the first call starts the clock
                        pct = since_last if st.cpu_started else None
                        st.cpu_started = True
                    rss = st.proc.memory_info().rss / 2**20
                    state = st.proc.status()
            except psutil.Error:
                self._cache.pop(pid, None)
                self._exited.add(pid)
                continue  # exited between NVML's list and now
            out.append(
                ProcessInfo(
                    pid=pid,
                    create_time=st.create_time,
                    user=st.user,
                    name=st.name,
                    cmdline=st.cmdline,
                    state=state,
                    cpu_percent=pct,
                    rss_mb=rss,
                    ppid=st.ppid,
                    parent_cmd=st.parent_cmd,
                    gpus=gpus,
                    gpu_mem_mb=gpu_mem,
                    rank=st.rank,
                    env_error=st.env_error,
                    owner=st.owner,
                )
            )
        alive = set(pids)
        for pid in [p for p in self._cache if p not in alive]:
            del self._cache[pid]
        self._exited &= alive
        return out


class HostTop:
    """The busiest host processes, for nodes with no GPU to show (like `top`).

    CPU% is the share of one CPU since the previous call, so the first call can only start
    the clocks: every process then reads as unknown. A caller that wants a true ranking
    right away (`gputui snapshot`) calls twice, an interval apart.
    """

    def __init__(self, limit: int = 40) -> None:
        self.limit = limit
        self._procs: dict[int, psutil.Process] = {}

    def top(self) -> list[tuple[int, float | None]]:
        """(pid, CPU% or None when not yet measured), busiest first, at most `limit`."""
        seen: dict[int, psutil.Process] = {}
        usage: list[tuple[float, int, float | None]] = []
        for p in psutil.process_iter():
            known = self._procs.get(p.pid)
            measured = known is not None and known == p  # psutil compares pid and create time
            cached = known if measured and known is not None else p
            try:
                pct = cached.cpu_percent(None)
            except psutil.Error:
                continue
            seen[p.pid] = cached
            usage.append((pct if measured else -1.0, p.pid, pct if measured else None))
        self._procs = seen
        usage.sort(key=lambda u: (-u[0], u[1]))
        return [(pid, pct) for _, pid, pct in usage[: self.limit]]

    def pids(self) -> list[int]:
        return [pid for pid, _ in self.top()]


def now() -> float:
    return time.time()
