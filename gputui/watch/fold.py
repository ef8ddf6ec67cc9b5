"""The evidence held for a job, explained and folded into its verdict.

Why apart from the Watcher: the records (gathered now, or replayed from a recording) are
kept in one store (gputui.watch.records); at each verdict about a job, the newest record of
each kind taken in this spin episode is explained (gputui.diagnose: pure) and folded in,
with the GPU health words first. Explaining is the costly part, so it is done again only
when the records or the judgement change, not every sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gputui.collect.model import Job, ProcessInfo, Snapshot
from gputui.diagnose.verdict import Verdict
from gputui.watch.gatherers import Explain
from gputui.watch.records import EPISODE_SLACK_S, RecordStore
from gputui.watch.targets import busy_by_ras

if TYPE_CHECKING:
    from gputui.diagnose.health.judge import HealthTracker
    from gputui.watch.busy import BusyWatch

__all__ = ["EvidenceFold"]


class EvidenceFold:
    """The record store read for verdicts: newest per kind, explained, cached."""

    def __init__(self, records: RecordStore, explainers: Mapping[str, Explain]) -> None:
        self.records = records
        self.explainers = explainers
        self._cache: tuple[Any, list[Any]] | None = None

    def keep(self, rec: dict[str, Any]) -> None:
        """Hold `rec` for the verdicts (a kind nobody explains is not held)."""
        self.records.keep(rec, self.explainers)

    def newest(self, kind: str, job: Job, start: float) -> dict[str, Any] | None:
        """The newest record of `kind` for `job` taken since `start` (for the early call)."""
        got = dict(self.records.newest((kind,), job.key, set(job.pids), start))
        return got.get(kind)

    def prune(self, before: float) -> None:
        """No alarm: records older than `before` belong to no future episode."""
        self.records.prune(before)

    def _episode(self, v: Verdict, job: Job) -> list[tuple[str, dict]]:
        """The newest record of each kind for this job, taken in this spin episode."""
        start = (v.since if v.since is not None else v.t) - EPISODE_SLACK_S
        return self.records.newest(self.explainers, job.key, {*job.pids, *v.suspect_pids}, start)

    def enrich(
        self,
        v: Verdict,
        snap: Snapshot,
        job: Job,
        health: HealthTracker,
        seen: dict[int, ProcessInfo] | None,
        busy: BusyWatch,
    ) -> Verdict:
        """`v` with the job's evidence: the health words, then each kind's explanation,
        judged busy where the evidence shows progress (gputui.watch.busy, RAS)."""
        from gputui.diagnose.evidence import Evidence, fold
        from gputui.diagnose.health.findings import health_evidence, with_health_headline

        # A failed GPU or a rank's Xid leads the verdict (gputui.diagnose.health.findings).
        hw = [e for e in (health_evidence(health, v, snap, job, seen),) if e is not None]
        recs = self._episode(v, job)
        if not recs:
            return with_health_headline(fold(v, hw)) if hw else v
        # Explain again only when the records or the judgement change, not every sample.
        ids = tuple((k, r["t"], id(r)) for k, r in recs)
        key = (ids, v.state, v.spinning, v.suspects, v.vanished)
        if self._cache is not None and self._cache[0] == key:
            return busy.judged(v, snap, self._cache[1], hw, busy_by_ras(v, self._cache[1]))
        ev = []
        for kind, rec in recs:
            try:
                ev.append(self.explainers[kind](rec, v, snap))
            except Exception as e:  # an explainer's bug must not take the verdict with it
                ev.append(Evidence(kind, findings=(f"{kind}: could not be explained ({e})",)))
        self._cache = (key, ev)
        return busy.judged(v, snap, ev, hw, busy_by_ras(v, ev))
