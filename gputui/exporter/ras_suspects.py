"""What NCCL RAS names for the exporter: the ranks behind, and ranks in different collectives.

The exporter never attaches to a process (no py-spy), but asking RAS costs nothing: it
answers on localhost in milliseconds. So while a job is stalled, its RAS is asked every few
seconds (gputui.watch.ras_poll, one query at a time, in its own thread), and the newest answer is
explained (gputui.diagnose.nccl.ras, pure) into the suspects `gputui_job_suspect` adds beyond
NVML's, and the `gputui_job_mismatch` flag. Read by the sampler thread only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from gputui.collect.model import Snapshot
from gputui.watch.judge import Judge


@dataclass(frozen=True)
class Named:
    """What RAS says about one job: ranks in different collectives, and the ranks behind
    (gpu, rank, pid as RAS reports them; pid only when it is a process of this node)."""

    mismatch: bool = False
    behind: tuple[tuple[int | None, int | None, int | None], ...] = ()


class RasSuspects:
    def __init__(self, interval: float | None = None) -> None:
        from gputui.watch.ras_poll import INTERVAL_S, RasPoller

        self.cancel = threading.Event()
        self._lock = threading.Lock()
        self._records: dict[str, dict[str, Any]] = {}  # job key -> newest answer's record
        self.poller = RasPoller(
            self._keep, self.cancel, interval=INTERVAL_S if interval is None else interval
        )

    def _keep(self, rec: dict[str, Any]) -> None:
        key = rec.get("job")
        if isinstance(key, str):
            with self._lock:
                self._records[key] = rec

    def update(self, snap: Snapshot, judge: Judge) -> None:
        """Ask RAS for every stalled or hung job; forget the jobs that are not any more."""
        procs = {p.pid: p for p in snap.processes}
        keys = set(judge.job_verdicts)
        for key, v in judge.job_verdicts.items():
            group = judge.groups.get(key)
            pids = {p for m in group.members.values() for p in m.pids} if group else set()
            self.poller.poll(key, tuple(procs[p] for p in sorted(pids) if p in procs), v.state)
        self.poller.end(keys)
        with self._lock:
            for key in [k for k in self._records if k not in keys]:
                del self._records[key]

    def named(self, key: str, snap: Snapshot | None) -> Named:
        """RAS's answer for a job, explained; empty when RAS said nothing usable."""
        from gputui.diagnose.nccl.ras import explain_nccl
        from gputui.diagnose.verdict import Verdict

        with self._lock:
            rec = self._records.get(key)
        if rec is None:
            return Named()
        try:
            ev = explain_nccl(rec, Verdict(t=float(rec.get("t") or 0.0)), snap)
        except Exception:  # an explainer's bug must not cost the scrape its job series
            return Named()
        x = ev.extra if isinstance(ev.extra, dict) else {}
        local = {p.pid for p in snap.processes} if snap is not None else set()
        behind = []
        for e in [*(x.get("behind") or []), *(x.get("missing") or [])]:
            if isinstance(e, dict) and e.get("confirmed", True):
                pid = e.get("pid") if e.get("pid") in local else None
                behind.append((_int(e.get("gpu")), _int(e.get("rank")), pid))
        return Named(bool(x.get("mismatch")), tuple(behind))

    def close(self) -> None:
        self.cancel.set()
        self.poller.close()


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
