"""NCCL RAS's pids made into pids that mean something where gputui runs.

RAS reports each rank's pid as the rank sees itself. Run on the host with the job inside a
PID namespace (a container, `unshare --pid`), that is the namespace's pid: on the GPU machine
the first stalled line named "pid 3" until the stack-based line put the host pid. The gatherer
records, for each local rank, its pid here and its innermost namespace pid (`nspid`, from
`NSpid:` in /proc/PID/status); this module maps RAS's ranks through them before any sentence
or JSON is made. A match needs the same namespace pid *and* the same GPU, so a pid of another
node (which RAS also reports) is never taken for a local one. Pure: the record carries the map.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gputui.collect.nccl.ras_model import RasAnswer, RasRank

PidMap = dict[tuple[int, int | None], int]  # (namespace pid, GPU or None) -> pid here


def pid_map(local: Any) -> PidMap:
    """From a record's `local` part: every rank whose namespace pid differs from its pid."""
    out: PidMap = {}
    for r in local[:1024] if isinstance(local, list) else []:
        if not isinstance(r, dict):
            continue
        pid, ns = r.get("pid"), r.get("nspid")
        if not isinstance(pid, int) or not isinstance(ns, int) or isinstance(ns, bool) or ns == pid:
            continue
        listed = r.get("gpus")
        gpus: list[int | None] = (
            [g for g in listed if isinstance(g, int)] if isinstance(listed, list) else []
        )
        for g in gpus or [None]:
            out[(ns, g)] = pid
    return out


def _here(r: RasRank, m: PidMap) -> RasRank:
    if r.pid is None:
        return r
    pid = m.get((r.pid, r.gpu))
    if pid is None and not any(g is not None for _, g in m):
        pid = m.get((r.pid, None))  # the gatherer knew no GPUs: the pid alone
    return replace(r, pid=pid) if pid is not None else r


def with_host_pids(answer: RasAnswer, m: PidMap) -> RasAnswer:
    """The answer with each local rank's pid as seen here."""
    if not m:
        return answer
    comms = tuple(
        replace(
            c,
            ranks=tuple(_here(r, m) for r in c.ranks),
            missing=tuple(_here(r, m) for r in c.missing),
        )
        for c in answer.comms
    )
    return replace(answer, comms=comms)
