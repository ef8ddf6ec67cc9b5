"""The Watcher's evidence records: kept per job and kind for the verdicts, queued for
`gputui record`.

Why a store of its own: gatherer threads add records while the sampler thread reads them, a
replay hands the same records back through its snapshots, and memory must stay bounded on a
node that runs for weeks. So every record goes through one lock; only the newest few per
(job, kind) are kept, and those too old for any future spin episode are dropped while no
alarm is up. A record is a JSON-able dict with at least "type", "job" and "t".
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

# A record taken this long before a job's spinning began still belongs to that episode
# (clocks of the sampler and the gatherer differ a little); older ones are a past episode.
EPISODE_SLACK_S = 5.0
KEEP_PER_JOB = 4  # records kept per (job, kind): only the newest usable one is shown
MAX_QUEUED = 1024  # queued for `record` and not taken yet (the dashboard takes none): newest kept


class RecordStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], list[dict[str, Any]]] = {}  # newest last
        self._new: list[dict[str, Any]] = []  # gathered, not yet taken by take()

    def keep(self, rec: dict[str, Any], kinds: Collection[str]) -> None:
        """Keep `rec` for the verdicts when it is of one of `kinds`, names its job and has a
        numeric time (a record from a recording may not)."""
        kind, job, t = rec.get("type"), rec.get("job"), rec.get("t")
        if not isinstance(kind, str) or kind not in kinds or not isinstance(job, str):
            return
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            return
        with self._lock:
            kept = self._kept.setdefault((job, kind), [])
            kept.append(rec)
            kept.sort(key=lambda r: r["t"])
            del kept[:-KEEP_PER_JOB]

    def queue(self, rec: dict[str, Any]) -> None:
        """For `gputui record` to write (take())."""
        with self._lock:
            self._new.append(rec)
            del self._new[:-MAX_QUEUED]

    def take(self) -> list[dict[str, Any]]:
        """Records queued since the last call, oldest first."""
        with self._lock:
            out, self._new = self._new, []
        return sorted(out, key=lambda r: r.get("t", 0))

    def held(self) -> list[dict[str, Any]]:
        """Every record held now, kept or queued, each once, oldest first: what a bundle
        writes into its trace so that it replays to the verdict shown."""
        with self._lock:
            recs = [r for kept in self._kept.values() for r in kept] + self._new
        once = list({id(r): r for r in recs}.values())
        return sorted(once, key=lambda r: r["t"] if isinstance(r.get("t"), (int, float)) else 0)

    def count(self, job: str, kind: str) -> int:
        with self._lock:
            return len(self._kept.get((job, kind), ()))

    def prune(self, horizon: float) -> None:
        """Drop the records older than `horizon` (no episode to come can use them)."""
        with self._lock:
            for key in list(self._kept):
                kept = [r for r in self._kept[key] if r["t"] >= horizon]
                if kept:
                    self._kept[key] = kept
                else:
                    del self._kept[key]

    def newest(
        self, kinds: Collection[str], job: str, pids: set[int], start: float
    ) -> list[tuple[str, dict[str, Any]]]:
        """The newest record of each kind for `job` taken at or after `start`; where the job
        has none, one under another key that names one of `pids` (a job whose key changed)."""
        found = []
        with self._lock:
            for kind in kinds:
                recs = self._kept.get((job, kind), [])
                if not recs:
                    recs = [
                        r
                        for (_k, kd), rs in self._kept.items()
                        if kd == kind
                        for r in rs
                        if _pids_of(r) & pids
                    ]
                usable = [r for r in recs if r["t"] >= start]
                if usable:
                    found.append((kind, max(usable, key=lambda r: r["t"])))
        return found


def _pids_of(rec: dict[str, Any]) -> set[int]:
    ranks = rec.get("ranks")
    if not isinstance(ranks, list):
        return set()
    return {r["pid"] for r in ranks[:256] if isinstance(r, dict) and isinstance(r.get("pid"), int)}
