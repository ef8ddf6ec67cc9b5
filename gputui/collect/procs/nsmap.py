"""Inside a container: NVML's pids made into pids that work here, and memory nobody here holds.

Asked from inside a PID namespace, NVML answers in one of two ways, depending on the driver:

- it translates pids into the caller's namespace and hides processes outside it (driver 580
  measured on an H100): our ranks are listed with the pids we see, other containers' are
  not, and their GPU memory is used memory with no process behind it;
- it reports the host's pids (older drivers), which mean nothing here: every row reads
  "No Such Process", and an attach or a `suspect_pids` entry would name the wrong process.

Every CUDA process holds `/dev/nvidia<N>` open (N = the GPU's minor number), whatever its
namespace, so the device nodes a process here holds are the bridge: an NVML pid that is not
visible here is matched to a process here that holds that GPU's device node and that NVML did
not list under its own pid. One candidate: a match. Several: matched in start order (both
namespaces hand out pids in increasing order), and said to be a guess. The path is matched
(`/dev/nvidia0`), not the device's major/minor, since a runtime or a test may put something
else than the driver's character device there.

Scanning every process's fds is not free, so it runs only when NVML names a pid that is not
visible here, and its answer is kept for `RESCAN_S`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

RESCAN_S = 5.0
MAX_FDS_PER_PROCESS = 4096  # a process with more open files is read up to here
OUTSIDE_MIN_MB = 256.0  # less than this unexplained is the driver's own, not a process
_DEV = re.compile(r"/dev/nvidia(\d+)$")


@dataclass(frozen=True)
class PidMatch:
    """NVML's pid and the pid that works here, with how sure the match is."""

    nvml_pid: int
    local_pid: int
    gpu: int
    guess: bool  # several candidates: matched in start order


def gpu_nodes(pid: int, proc: str = "/proc") -> set[int]:
    """The GPU minor numbers whose /dev/nvidiaN a process holds open (empty if unreadable)."""
    out: set[int] = set()
    d = f"{proc}/{pid}/fd"
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for name in names[:MAX_FDS_PER_PROCESS]:
        try:
            target = os.readlink(f"{d}/{name}")
        except OSError:
            continue
        m = _DEV.match(target)
        if m:
            out.add(int(m.group(1)))
    return out


def holders(proc: str = "/proc") -> dict[int, set[int]]:
    """pid -> GPU minors, for every process here that holds a GPU's device node."""
    out: dict[int, set[int]] = {}
    try:
        entries = os.listdir(proc)
    except OSError:
        return out
    for e in entries:
        if e.isdigit():
            nodes = gpu_nodes(int(e), proc)
            if nodes:
                out[int(e)] = nodes
    return out


def match_pids(
    invisible: dict[int, tuple[int, ...]],
    listed: Iterable[int],
    held: dict[int, set[int]],
    minor_of: Callable[[int], int] = lambda gpu: gpu,
) -> list[PidMatch]:
    """Match NVML pids not visible here ({pid: its GPU indices}) to processes here.

    `listed` are the pids NVML gave that ARE visible here (they are taken); `held` is
    `holders()`. A process here is a candidate for a GPU when it holds that GPU's node and
    is not already listed. Pure, so the rule is tested without namespaces.
    """
    taken = set(listed)
    out: list[PidMatch] = []
    by_gpu: dict[int, list[int]] = {}
    for pid, gpus in invisible.items():
        if gpus:
            by_gpu.setdefault(gpus[0], []).append(pid)
    for gpu, nvml_pids in sorted(by_gpu.items()):
        minor = minor_of(gpu)
        cands = sorted(p for p, nodes in held.items() if minor in nodes and p not in taken)
        guess = len(cands) > 1 or len(nvml_pids) > 1
        for nvml_pid, local in zip(sorted(nvml_pids), cands, strict=False):
            out.append(PidMatch(nvml_pid, local, gpu, guess))
            taken.add(local)
    return out


# The kernel's initial PID namespace always has this inode number (PROC_PID_INIT_INO).
INIT_PID_NS = "pid:[4026531836]"


def in_child_pid_namespace(link: str = "/proc/self/ns/pid") -> bool:
    """Whether this process runs in a PID namespace below the host's (a container).

    `NSpid:` in /proc/self/status cannot tell: a container mounts its own /proc, which
    shows only its own level. The initial namespace's inode number is a kernel constant.
    """
    try:
        return os.readlink(link) != INIT_PID_NS
    except OSError:
        return False


class PidMapper:
    """Keeps the device-node scan for `RESCAN_S` and maps NVML pids for each sample."""

    def __init__(self, proc: str = "/proc") -> None:
        self.proc = proc
        self._held: dict[int, set[int]] = {}
        self._at = -RESCAN_S
        self.nested = in_child_pid_namespace()

    def matches(
        self, invisible: dict[int, tuple[int, ...]], listed: Iterable[int]
    ) -> list[PidMatch]:
        if not invisible:
            return []
        now = time.monotonic()
        if now - self._at >= RESCAN_S:
            self._held, self._at = holders(self.proc), now
        return match_pids(invisible, listed, self._held)


def unexplained_mb(used: float | None, explained: Iterable[float | None]) -> float | None:
    """GPU memory in use that no process listed here holds: another container's, when NVML
    hides processes outside this namespace. None when too small to be a process's."""
    if used is None:
        return None
    rest = used - sum(m for m in explained if m is not None)
    return round(rest, 1) if rest >= OUTSIDE_MIN_MB else None


def reconcile(
    gpus: tuple[Any, ...], mapper: PidMapper
) -> tuple[tuple[Any, ...], dict[int, PidMatch]]:
    """The GPU samples with NVML's pids made into pids that work here, and the matches by
    local pid. Pids that match nothing stay as NVML gave them (shown as not visible)."""
    listed = {p for g in gpus for p in g.pids}
    invisible: dict[int, tuple[int, ...]] = {}
    for g in gpus:
        for p in g.pids:
            if not _visible(p):
                invisible[p] = (*invisible.get(p, ()), g.index)
    found = mapper.matches(invisible, listed - set(invisible))
    by_nvml = {m.nvml_pid: m.local_pid for m in found}
    out = []
    for g in gpus:
        if by_nvml and any(p in by_nvml for p in g.pids):
            g = replace(
                g,
                pids=tuple(by_nvml.get(p, p) for p in g.pids),
                proc_mem_mb=tuple((by_nvml.get(p, p), m) for p, m in g.proc_mem_mb),
            )
        if mapper.nested:
            g = replace(
                g, mem_outside_mb=unexplained_mb(g.mem_used_mb, (m for _, m in g.proc_mem_mb))
            )
        out.append(g)
    return tuple(out), {m.local_pid: m for m in found}


def _visible(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")
