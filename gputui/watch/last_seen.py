"""The last process seen on each GPU of each job: a rank that dies is named by it.

Why kept: when a rank's process exits, NVML lists nothing on its GPU any more, so the
Watcher's gatherers (its last words, the `gone` stack of a bundle) can only name it by the
process that was there before. Bounded: a job no longer listed is forgotten, unless its
alarm still lasts.
"""

from __future__ import annotations

from collections.abc import Container

from gputui.collect.model import ProcessInfo, Snapshot

__all__ = ["LastSeen"]


class LastSeen:
    """job key -> GPU index -> the process last seen on it."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[int, ProcessInfo]] = {}

    def of(self, key: str) -> dict[int, ProcessInfo] | None:
        """The GPUs' last processes of job `key`; None when it was never seen."""
        return self._seen.get(key)

    def remember(self, snap: Snapshot, alarmed: Container[str]) -> None:
        """Note `snap`'s processes; forget the jobs neither listed now nor in `alarmed`."""
        if not snap.jobs and not self._seen:
            return  # no job now, none remembered: nothing to do (a host with no GPU job)
        procs = {p.pid: p for p in snap.processes}
        keys = set()
        for job in snap.jobs:
            keys.add(job.key)
            seen = self._seen.setdefault(job.key, {})
            for pid in job.pids:
                p = procs.get(pid)
                if p is None:
                    continue
                for g in p.gpus:
                    seen[g] = p
        if len(self._seen) > len(keys):  # a job remembered that is not here now
            for key in [k for k in self._seen if k not in keys and k not in alarmed]:
                del self._seen[key]
