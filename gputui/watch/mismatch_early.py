"""Ranks in different collectives: called as soon as NCCL RAS shows it twice, not at the clock.

On 4 x H200 (rank 0 in broadcast, rank 1 in all_reduce) the first alarm came at
`--stall-after` (10 s) and said "different lines in synchronize", true and useless; the
collectives were named only at +19 s, once the flight recorder's analysis had run. NCCL RAS,
asked from the first spinning sample (gputui.watch.ras_poll), knows each rank's collective
from its per-type counts within a few seconds. So when the newest RAS record of a spinning
job compares two answers that agree on a collective-type mismatch with nothing advancing,
and the spin has lasted MISMATCH_EARLY_S, the job is called stalled at once: its first line
is RAS's "ranks in different collectives (NCCL RAS): rank 0 is ahead in Broadcast ...", and
the stacks gathered at that call join each rank's line to its collective
(gputui.diagnose.collective_mismatch) within a second or so.

A healthy job that alternates broadcasts and all_reduces may show one rank ahead in another
type for an instant, but then its counts advance between the two answers and its GPUs do not
spin for seconds: no call. Once called, the job stays called until its spin ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputui.collect.model import Job, Snapshot
from gputui.collect.pacing import lasted
from gputui.diagnose.verdict import Verdict

MISMATCH_EARLY_S = 3.0  # the spin's length before RAS's mismatch calls it
SLACK_S = 5.0


def _two_answers(rec: dict[str, Any]) -> bool:
    ras = rec.get("ras")
    queries = ras.get("queries") if isinstance(ras, dict) else None
    return isinstance(queries, list) and len(queries) >= 2


class MismatchEarly:
    """Per sample: a spinning job whose RAS answers agree on mismatched collectives."""

    def __init__(self) -> None:
        self._called: set[str] = set()
        self._tried: dict[str, int] = {}  # job key -> id of the record that said no

    def early(
        self,
        snap: Snapshot,
        detector: Any,
        newest: Callable[[str, Job, float], dict[str, Any] | None],
        explainers: dict[str, Any],
    ) -> Verdict | None:
        runs = detector.runs
        if not runs:
            self._called.clear()
            return None
        if "ras" not in explainers:
            return None
        spinning = set()
        for job in snap.jobs:
            mine = [runs[g] for g in job.gpus if g in runs]
            if not mine:
                continue
            spinning.add(job.key)
            since = min(r.since for r in mine)
            if job.key not in self._called:
                if not lasted(snap.t - since, MISMATCH_EARLY_S):
                    continue
                rec = newest("ras", job, since - SLACK_S)
                if rec is None or self._tried.get(job.key) == id(rec) or not _two_answers(rec):
                    continue
                self._tried[job.key] = id(rec)
                try:
                    spin = tuple(sorted(g for g in job.gpus if g in runs))
                    quiet = tuple(sorted(g for g in job.gpus if g not in runs))
                    judged = Verdict(t=snap.t, since=since, spinning=spin, suspects=quiet)
                    x = explainers["ras"](rec, judged, snap).extra
                except Exception:  # noqa: S112 - an explainer's bug: no early call
                    continue
                if not x.get("mismatch") or x.get("progress"):
                    continue
                self._called.add(job.key)
            v = detector.judge_now(job.key, snap)
            if v is not None:
                return v  # type: ignore[no-any-return]
        self._called &= spinning
        return None
