"""The NCCL evidence gatherer: NCCL RAS twice, and the flight recorder where it is on.

`gather_nccl(target, cancel)` is registered in gputui.watch.watcher's Watcher as
`("nccl", gather_nccl, explain_nccl)` (docs/architecture.md). It runs in the Watcher's
gathering thread once per stall transition of a job, never on the UI thread, and returns
one typed record `{"type": "nccl", "t", "job", "trigger", "ras": {...}, "flightrec": {...},
"local": [...]}` that `gputui record` writes into a recording; gputui.diagnose.nccl.ras
explains it, live or in a replay. It never raises: failures are data in the record.

RAS is asked twice, `RAS_INTERVAL_S` apart, because a rank that is alive but launches
nothing shows only as a count that stays behind. The flight recorder (a dump takes seconds)
runs in parallel with the two RAS queries. The Watcher passes `ras=False`: its RAS poller
(gputui.watch.ras_poll) asks RAS from the start of the spin and every few seconds after, reusing
`ras_setup`/`ras_query` here, so the stall transition only triggers the flight recorder.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

import psutil

from gputui.collect.model import ProcessInfo
from gputui.collect.nccl.flightrec import FrRank, flight_record, job_interpreter
from gputui.collect.nccl.ras import JobSide, query_ras
from gputui.collect.nccl.ras_model import answer_to_dict
from gputui.collect.procs.libraries import process_libraries

KIND = "nccl"
RAS_INTERVAL_S = 3.0
_ENV_KEYS = ("NCCL_RAS_ENABLE", "NCCL_RAS_ADDR")


class Target(Protocol):
    """What the gatherer reads of gputui.watch.watcher.JobTarget."""

    key: str
    trigger: str


def local_ranks(ranks: Sequence[ProcessInfo]) -> list[dict[str, Any]]:
    """The record's `local` part: pid, rank and GPUs of each live rank here.

    Args:
        ranks: the job's processes here.

    Returns:
        `{"pid", "rank", "gpus"}` per live rank.
    """
    out = []
    for p in ranks:
        proc = _same_process(p) if p.live else None
        if proc is None:
            continue
        try:
            env = proc.environ()
        except psutil.Error:
            env = {}
        out.append(_local_entry(p, env))
    return out


def _local_entry(p: ProcessInfo, env: dict[str, str]) -> dict[str, Any]:
    """One rank of the record's `local` part; `nspid` where the rank sees itself under
    another pid (a PID namespace): RAS reports that one (gputui.diagnose.nccl.pids)."""
    entry: dict[str, Any] = {"pid": p.pid, "rank": _rank_number(p, env), "gpus": list(p.gpus)}
    ns = namespace_pid(p.pid)
    if ns is not None and ns != p.pid:
        entry["nspid"] = ns
    return entry


def namespace_pid(pid: int) -> int | None:
    """The pid a process has in its own (innermost) PID namespace: the last `NSpid:` field."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f.read(16384).splitlines():
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _ranks_of(target: Any) -> Sequence[ProcessInfo]:
    return tuple(getattr(target, "ranks", None) or getattr(target, "processes", None) or ())


def _same_process(p: ProcessInfo) -> psutil.Process | None:
    """The live process, if it is still the one the snapshot saw (pid and create time)."""
    try:
        proc = psutil.Process(p.pid)
        if p.create_time is not None and abs(proc.create_time() - p.create_time) > 0.05:
            return None
        return proc
    except psutil.Error:
        return None


def _rank_number(p: ProcessInfo, env: dict[str, str]) -> int | None:
    if p.rank is not None and p.rank.rank is not None:
        return p.rank.rank
    v = env.get("RANK", "")
    return int(v) if v.isdigit() else None


def job_side(ranks: Sequence[ProcessInfo]) -> JobSide | None:
    """The ranks' pids, their users and the job's world size, against which a RAS listener
    and its answer are checked; None when no rank can be read (nothing to check against)."""
    pids, uids, world = [], set(), None
    for p in ranks:
        proc = _same_process(p) if p.live else None
        if proc is None:
            continue
        try:
            uids.add(proc.uids().real)
        except psutil.Error:
            continue
        pids.append(p.pid)
        world = world or (p.rank.world_size if p.rank is not None else None)
    return JobSide(pids=pids, uids=uids, world=world) if pids else None


def _query(addr: str | None, cancel: threading.Event, job: JobSide | None) -> dict[str, Any]:
    q = query_ras(addr, cancel=cancel, job=job)
    return {
        "outcome": q.outcome,
        "t": round(q.t, 3),
        "latency_s": q.latency_s,
        "nbytes": q.nbytes,
        "error": q.error,
        "answer": answer_to_dict(q.answer) if q.answer is not None else None,
        **({"listener": q.listener} if q.listener else {}),
    }


def ras_setup(env: dict[str, str], libs: dict[str, Any], interval: float) -> dict[str, Any]:
    """The `ras` part of a record before any query: the job's RAS settings and its NCCL.

    Args:
        env: a rank's environment.
        libs: the libraries it has mapped (process_libraries).
        interval: seconds between the two RAS queries.

    Returns:
        The `ras` part: the job's NCCL_RAS_* settings, NCCL loaded and its version, the interval, no
        queries yet.
    """
    nccl = libs.get("nccl")
    return {
        "env": {k: env[k] for k in _ENV_KEYS if k in env},
        "nccl": {"loaded": nccl is not None, "version": (nccl or {}).get("version")},
        "interval_s": interval,
        "queries": [],
    }


def ras_enabled(env: dict[str, str], libs: dict[str, Any]) -> bool:
    """Whether asking RAS can answer: NCCL is loaded and RAS is not turned off.

    Args:
        env: a rank's environment.
        libs: the libraries it has mapped (process_libraries).

    Returns:
        True when NCCL is loaded and NCCL_RAS_ENABLE is not 0.
    """
    return env.get("NCCL_RAS_ENABLE", "").strip() != "0" and libs.get("nccl") is not None


def ras_query(
    env: dict[str, str], cancel: threading.Event, ranks: Sequence[ProcessInfo] = ()
) -> dict[str, Any]:
    """One bounded RAS query at the job's address, as a record's query entry; the listener
    and the answer checked against `ranks` (gputui.collect.nccl.ras.JobSide).

    Args:
        env: a rank's environment (NCCL_RAS_ADDR).
        cancel: set to stop at once.
        ranks: the job's ranks here, that the listener and the answer are checked against.

    Returns:
        The query entry (a JSON-able dict): its outcome, and the answer when one came.
    """
    return _query(env.get("NCCL_RAS_ADDR") or None, cancel, job_side(ranks))


def _ras(
    env: dict[str, str],
    libs: dict[str, Any],
    cancel: threading.Event,
    interval: float,
    ranks: Sequence[ProcessInfo] = (),
) -> dict[str, Any]:
    ras = ras_setup(env, libs, interval)
    if env.get("NCCL_RAS_ENABLE", "").strip() == "0":
        return ras
    first = ras_query(env, cancel, ranks)
    ras["queries"].append(first)
    if first["outcome"] == "done" and not cancel.wait(interval):
        ras["queries"].append(ras_query(env, cancel, ranks))
    return ras


def gather_nccl(
    target: Any,
    cancel: threading.Event,
    *,
    ras_interval: float = RAS_INTERVAL_S,
    fr_wait_s: float | None = None,
    analyzer_timeout_s: float | None = None,
    ras: bool = True,
) -> dict[str, Any] | None:
    """The `nccl` record for a stalled job's local ranks, or None when none is alive here.

    `ras=False` leaves RAS out (the Watcher's RAS poller asks it from the spin's start).

    Args:
        target: the stalled job at its transition (gputui.watch.gatherers.JobTarget).
        cancel: set to stop early.
        ras_interval: seconds between the two RAS queries (the second shows who moved).
        fr_wait_s: how long to wait for the flight recorder's dumps; None: its default.
        analyzer_timeout_s: the bound on the flight recorder's analyzer; None: its default.
        ras: whether to ask RAS (False when the Watcher's poller asks it).

    Returns:
        The `nccl` record, or None when none of the job's ranks is alive here.
    """
    record: dict[str, Any] = {
        "type": KIND,
        "t": time.time(),
        "job": getattr(target, "key", None),
        "trigger": getattr(target, "trigger", None),
    }
    try:
        live: list[tuple[ProcessInfo, psutil.Process, dict[str, str]]] = []
        problems = []
        for p in _ranks_of(target):
            if not p.live:
                continue
            proc = _same_process(p)
            if proc is None:
                continue
            try:
                env = proc.environ()
            except psutil.Error as e:
                problems.append(f"pid {p.pid}: environment not readable ({type(e).__name__})")
                env = {}
            live.append((p, proc, env))
        if not live:
            return None
        record["local"] = [_local_entry(p, env) for p, _, env in live]
        if problems:
            record["problems"] = problems
        fr_result: dict[str, Any] = {}
        fr_thread = _start_flightrec(live, cancel, fr_result, fr_wait_s, analyzer_timeout_s)
        env0 = live[0][2]
        if ras:
            libs = process_libraries(live[0][0].pid)
            ranks = [p for p, _, _ in live]
            record["ras"] = _ras(env0, libs, cancel, ras_interval, ranks)
        if fr_thread is not None:
            fr_thread.join()  # bounded by the flight recorder's own wait and analyzer limits
            record["flightrec"] = fr_result.get("result") or {
                "outcome": "failed",
                "error": fr_result.get("error", "no result"),
            }
        record["t"] = time.time()
        return record
    except Exception as e:  # a gatherer never raises: the failure is the evidence
        record["error"] = f"{type(e).__name__}: {e}"
        return record


def _start_flightrec(
    live: list[tuple[ProcessInfo, psutil.Process, dict[str, str]]],
    cancel: threading.Event,
    out: dict[str, Any],
    wait_s: float | None,
    analyzer_timeout_s: float | None,
) -> threading.Thread | None:
    """The flight recorder in its own thread when the job set its pipe; None otherwise."""
    if not any(env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE") for _, _, env in live):
        return None
    ranks = []
    world = None
    for p, proc, env in live:
        r = _rank_number(p, env)
        if r is None:
            continue
        try:
            uids, gids, cmd = proc.uids(), proc.gids(), proc.cmdline()
        except psutil.Error:
            continue
        world = world or (p.rank.world_size if p.rank else None)
        ranks.append(
            FrRank(
                pid=p.pid,
                rank=r,
                env=env,
                uid=uids.real,
                gid=gids.real,
                interpreter=job_interpreter(p.pid, cmd, env),
            )
        )
    kw: dict[str, Any] = {"world_size": world}
    if wait_s is not None:
        kw["wait_s"] = wait_s
    if analyzer_timeout_s is not None:
        kw["analyzer_timeout_s"] = analyzer_timeout_s

    def work() -> None:
        try:
            out["result"] = flight_record(ranks, cancel, **kw)
        except Exception as e:  # reported in the record
            out["error"] = f"{type(e).__name__}: {e}"

    t = threading.Thread(target=work, name="gputui-flightrec", daemon=True)
    t.start()
    return t
