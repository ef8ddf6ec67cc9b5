"""Ranks among the host's processes, found by their environment, GPU or not.

Why: a job whose ranks wait in `init_process_group` (or torchrun's rendezvous) has no GPU
spinning and often none held yet, so NVML never lists it. Its ranks are found here instead:
every few seconds, off the caller's thread, only processes not looked at before, only
Python ones (by name, from /proc/PID/stat: no environment is read for anything else), and
only those whose environment holds RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT/TORCHELASTIC_*.
After the first scan, a new process is looked at once it has lived through a scan (2 s): a
node's short-lived processes (a shell's pipelines, health checks, `nvidia-smi`) come and go
by the dozen a second and are never read; reading the name of one that is still starting
costs up to a quarter of a millisecond each. A rank waits in its rendezvous far longer.

`listeners` says who listens on MASTER_ADDR:PORT (the TCPStore, or someone else holding
the port); gputui.tools.gather.rendezvous adds a stack of one rank.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from gputui.collect.model import RankInfo
from gputui.collect.procs.jobs import rank_from_env

SCAN_S = 2.0
MAX_HOST_RANKS = 4096
MAX_NEW_PER_SCAN = 4096  # environments read per scan at most (the rest: next scan)
_PYTHON_NAMES = ("python", "pt_main_thread", "torchrun", "pt_elastic")


@dataclass(frozen=True)
class HostRank:
    """A process with rank variables in its environment."""

    pid: int
    create_time: float
    rank: RankInfo
    name: str
    master_addr: str | None = None
    master_port: int | None = None
    ppid: int | None = None
    nnodes: str | None = None  # set for a torchrun agent (its --nnodes): not a rank itself


def _comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read(64).decode("utf-8", "replace").strip()
    except OSError:
        return None


def _port(v: str | None) -> int | None:
    if v is None or not (v.isascii() and v.isdigit()) or len(v) > 5:
        return None
    n = int(v)
    return n if 0 < n < 65536 else None


def read_rank(pid: int) -> HostRank | None:
    """A HostRank for a Python process with rank variables, else None (never raises)."""
    import psutil

    name = _comm(pid)
    if name is None or not name.lower().startswith(_PYTHON_NAMES):
        return None
    try:
        p = psutil.Process(pid)
        env = p.environ()
        ct = p.create_time()
        ppid = p.ppid()
    except (psutil.Error, OSError):
        return None
    info = rank_from_env(env)
    if info is None or info.rank is None or info.world_size is None:
        return _agent(p, pid, ct, name, ppid)
    return HostRank(
        pid,
        ct,
        info,
        name,
        (env.get("MASTER_ADDR") or None),
        _port(env.get("MASTER_PORT")),
        ppid,
    )


_LAUNCH_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def _flag(argv: list[str], *names: str) -> str | None:
    """`--name value` or `--name=value` (torchrun takes - and _ spellings)."""
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(n + "="):
                return a[len(n) + 1 :]
    return None


def _agent(p: Any, pid: int, ct: float, name: str, ppid: int | None) -> HostRank | None:
    """A torchrun agent (it waits in its own rendezvous for the other nodes before any
    rank exists), from its command line; None for any other process."""
    try:
        argv = [a[:512] for a in p.cmdline()[:256]]
    except Exception:
        return None
    script = next((i for i, a in enumerate(argv[:3]) if a.rsplit("/", 1)[-1] == "torchrun"), None)
    if script is None and not any(m in argv[:4] for m in _LAUNCH_MODULES):
        return None
    end = _flag(argv, "--rdzv-endpoint", "--rdzv_endpoint")
    addr = _flag(argv, "--master-addr", "--master_addr")
    port = _flag(argv, "--master-port", "--master_port")
    if end:
        addr, _, port = end.rpartition(":") if ":" in end else (end, "", "29400")
    key = f"{addr or '127.0.0.1'}:{port or 29500}"
    nnodes = _flag(argv, "--nnodes") or "1"
    info = RankInfo(master=key, run_id=_flag(argv, "--rdzv-id", "--rdzv_id"))
    return HostRank(pid, ct, info, name, addr or None, _port(port), ppid, nnodes=nnodes[:32])


@dataclass
class HostRankScanner:
    """Keeps the host's rank processes up to date; `ranks()` never blocks."""

    every: float = SCAN_S
    started: float = field(default_factory=time.time)
    _ranks: dict[int, HostRank] = field(default_factory=dict)
    _looked: dict[int, float | None] = field(default_factory=dict)  # pid -> create time
    _pending: set[int] = field(default_factory=set)  # new at the last scan, not looked at yet
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _busy: bool = False
    _last: float = 0.0
    _closed: bool = False
    scans: int = 0

    def poke(self) -> None:
        """Start a scan in the background if one is due (called per sample)."""
        now = time.monotonic()
        if self._closed or self._busy or now - self._last < self.every:
            return
        self._last, self._busy = now, True
        # A daemon thread, not an executor's: `q` must not wait for a scan of /proc under
        # load (the interpreter joins every executor thread at exit; seen: 2 s in CI)
        threading.Thread(target=self.scan, name="gputui-ranks", daemon=True).start()

    def scan(self) -> None:
        import psutil

        try:
            pids = set(psutil.pids())
            me = os.getpid()
            with self._lock:
                for pid in [p for p in self._ranks if p not in pids]:
                    del self._ranks[pid]
                for pid in [p for p in self._looked if p not in pids]:
                    del self._looked[pid]
            fresh = {p for p in pids if p not in self._looked and p != me}
            if self.scans:  # read once it lived through a scan (the module's docstring says why)
                due, self._pending = fresh & self._pending, fresh - self._pending
            else:  # the first scan: what runs when gputui starts is not churn
                due = fresh
            new = sorted(due)[:MAX_NEW_PER_SCAN]
            self._pending |= due.difference(new)  # over the cap: the next scan reads them
            found = [(pid, read_rank(pid)) for pid in new]
            with self._lock:  # one scan's ranks appear together, never half a job
                for pid, r in found:
                    self._looked[pid] = r.create_time if r else None
                    if r is not None and len(self._ranks) < MAX_HOST_RANKS:
                        self._ranks[pid] = r
            self.scans += 1
        finally:
            self._busy = False

    def ranks(self) -> list[HostRank]:
        with self._lock:
            return list(self._ranks.values())

    def close(self) -> None:
        self._closed = True  # a scan under way ends on its own; none starts after


def listeners(port: int) -> list[tuple[int | None, str]]:
    """(pid, address) of the TCP sockets listening on `port` (pid None when not ours to see).

    Args:
        port: a TCP port.

    Returns:
        (pid, address) of each socket listening on it.
    """
    import psutil

    out: list[tuple[int | None, str]] = []
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return out
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port:
            out.append((c.pid, f"{c.laddr.ip}:{c.laddr.port}"))
    return out


def describe(r: HostRank) -> dict[str, Any]:
    """A host rank as a record names it: pid, rank and the process's start time.

    Args:
        r: one rank found on this host.

    Returns:
        `{"pid", "rank", "create_time"}`.
    """
    return {"pid": r.pid, "rank": r.rank.rank, "create_time": round(r.create_time, 3)}
