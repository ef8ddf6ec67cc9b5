"""NCCL RAS asked early and again while a job stalls: evidence that keeps improving.

Why: RAS answers on localhost in milliseconds and attaches to nothing, so there is no reason
to wait for the stall: the Watcher asks it as soon as a job's GPUs start to spin (before
`stall_after`), then every `interval` seconds while the spin lasts. Each answer is a record
`{"type": "ras", "t", "job", "trigger", "ras": {"env", "nccl", "interval_s", "queries":
[previous, this]}, "local": [...]}`: the previous answer rides along, so the explainer
(gputui.diagnose.nccl.ras, pure) compares two counts from one record, live or in a replay.

Two answers whose collective counts advance say the job is busy (an all_reduce benchmark, a
parameter server look like a spin to NVML), not stalled; two that agree confirm the ranks
behind. Bounded: one query in flight at a time, off the caller's thread, each query bounded
by the RAS client's own timeouts, at most one every `interval` seconds per job (for as long
as the spin lasts: a benchmark busy for an hour may hang in its 61st minute).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputui.collect.model import Job, ProcessInfo, Snapshot
from gputui.collect.pacing import lasted
from gputui.tools.episodes import EpisodeWorker

KIND = "ras"
INTERVAL_S = 3.0


@dataclass
class _Episode:
    """One job's spin, from its first spinning sample until the spin ends."""

    trigger: str
    last_ask: float = float("-inf")  # monotonic time of the last query started
    setup: dict[str, Any] | None = None  # env and NCCL of the job (read once)
    env: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    previous: dict[str, Any] | None = None  # the last query that answered
    asked: int = 0


class RasPoller(EpisodeWorker[_Episode]):
    """Asks RAS for every spinning job; `emit(record)` receives each answer's record."""

    def __init__(
        self,
        emit: Callable[[dict[str, Any]], None],
        cancel: threading.Event,
        *,
        interval: float = INTERVAL_S,
        max_queries: int | None = None,
    ) -> None:
        super().__init__("gputui-ras")
        self.emit, self.cancel = emit, cancel
        self.interval, self.max_queries = interval, max_queries

    def poll(self, key: str, ranks: Sequence[ProcessInfo], trigger: str) -> None:
        """Called each sample for a job whose GPUs spin; never blocks."""
        ep = self._episodes.get(key)
        if ep is None:
            ep = self._episodes[key] = _Episode(trigger)
        ep.trigger = trigger
        now = time.monotonic()
        spent = self.max_queries is not None and ep.asked >= self.max_queries
        if not ep.enabled or spent or self.cancel.is_set():
            return
        if not lasted(now - ep.last_ask, self.interval) or self.pending():
            return
        live = tuple(p for p in ranks if p.live)
        if not live:
            return
        ep.last_ask = now
        ep.asked += 1
        self._submit(self._ask, key, ep, live)

    def poll_spinning(
        self, snap: Snapshot, spinning: Collection[int], alarm: Job | None, state: str
    ) -> None:
        """Ask for every job whose GPUs (`spinning`) spin now, before the stall is called,
        and for `alarm` (the job the verdict, in `state`, is about); end the others."""
        jobs = {j.key: (j, "spin") for j in snap.jobs if set(spinning) & set(j.gpus)}
        if alarm is not None:
            jobs[alarm.key] = (alarm, state)
        if jobs:  # no spinning job (most samples): no process index to build
            procs = {p.pid: p for p in snap.processes}
            for key, (job, trigger) in jobs.items():
                self.poll(key, tuple(procs[p] for p in job.pids if p in procs), trigger)
        self.end(set(jobs))

    def _ask(self, key: str, ep: _Episode, ranks: tuple[ProcessInfo, ...]) -> None:
        from gputui.tools.gather.nccl import local_ranks, ras_enabled, ras_query, ras_setup

        try:
            t = time.time()
            if ep.setup is None:
                ep.env, libs = _env_and_libs(ranks[0])
                ep.setup = ras_setup(ep.env, libs, self.interval)
                off = ep.env.get("NCCL_RAS_ENABLE", "").strip() == "0"
                # Libraries unreadable (another user's process): ask; RAS says if it is there.
                ep.enabled = ras_enabled(ep.env, libs) or (not libs and not off)
            ras = {**ep.setup, "queries": []}
            if ep.enabled:
                q = ras_query(ep.env, self.cancel, ranks)  # the listener must be the job's
                ras["queries"] = [*([ep.previous] if ep.previous else []), q]
                if q.get("outcome") == "done":
                    ep.previous = q
            # else: said once (RAS off, no NCCL); `enabled` is False, so it is not asked again
            rec = {"type": KIND, "t": round(t, 3), "job": key, "trigger": ep.trigger}
            rec.update(ras=ras, local=local_ranks(ranks))
        except Exception as e:  # a poller never raises: its failure is the record
            rec = {"type": KIND, "t": time.time(), "job": key, "error": f"{type(e).__name__}: {e}"}
        if not self.cancel.is_set():
            self.emit(rec)


def _env_and_libs(p: ProcessInfo) -> tuple[dict[str, str], dict[str, Any]]:
    import psutil

    from gputui.collect.procs.libraries import process_libraries

    try:
        env = psutil.Process(p.pid).environ()
    except psutil.Error:
        env = {}
    return env, process_libraries(p.pid)
