"""The exporter's busy jobs: a stalled job whose suspects move bytes is `busy`, not stalled.

The exporter never attaches to a process (no py-spy), so of the three signs of progress
(gputui.diagnose.hang.progress) it has the two the kernel counts: CPU time and bytes read and
written, from /proc. CPU time alone is no progress (a busy-wait loop burns a core with its
frames standing still, and the frames are what the exporter cannot see), so here a job is
busy only while its suspects move bytes: a checkpoint written, a data set read, a slow file
system waited on. A compile or an evaluation on the CPU stays stalled in the exporter; the
dashboard and `check`, which see frames, call it busy. Past --busy-limit a busy job is
stalled (or hung) again, so the alert fires for a phase that never ends.

Readings start when a job's GPUs start to spin (so the verdict at --stall-after already has
a window), on the sampler thread: two small /proc reads per non-spinning rank per sample,
only while a job spins.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gputui.collect.model import Snapshot
from gputui.collect.procs.progress import Counters, read_counters
from gputui.diagnose.hang.progress import BUSY_LIMIT_S, RankProgress, judge_rank

if TYPE_CHECKING:
    from gputui.watch.judge import Judge

KEEP = 64  # readings per pid (about 12 s at the exporter's pace)
WINDOW_S = 12.0


@dataclass
class _Pid:
    first: Counters
    readings: deque[Counters] = field(default_factory=lambda: deque(maxlen=KEEP))


class BusySuspects:
    """Follows the non-spinning ranks of spinning jobs; `busy(key, verdict)` judges one."""

    def __init__(self, busy_limit: float = BUSY_LIMIT_S) -> None:
        self.busy_limit = busy_limit
        self._jobs: dict[str, dict[int, _Pid]] = {}

    def update(self, snap: Snapshot, judge: Judge) -> None:
        """Read the counters of the non-spinning ranks of every job that spins now."""
        spinning = set(judge.runs)
        live = {p.pid for p in snap.processes if p.live}
        keep: set[str] = set()
        for key, group in judge.groups.items():
            if not spinning & set(group.members):
                continue
            keep.add(key)
            pids = self._jobs.setdefault(key, {})
            for gpu, m in group.members.items():
                if gpu in spinning:
                    continue
                for pid in m.pids:
                    if pid not in live:
                        continue
                    c = read_counters(pid, snap.t)
                    if c is None:
                        continue
                    old = pids.get(pid)
                    if old is None or old.first.start_ticks != c.start_ticks:
                        old = pids[pid] = _Pid(c)
                    old.readings.append(c)
                    while old.readings and old.readings[0].t < snap.t - WINDOW_S:
                        old.readings.popleft()
        for key in [k for k in self._jobs if k not in keep]:
            del self._jobs[key]

    def busy(self, key: str, verdict: Any) -> RankProgress | None:
        """The suspect that moves bytes, when every live suspect of the stalled job does,
        none is gone, and the phase is within --busy-limit; else None."""
        pids = self._jobs.get(key)
        if not pids or verdict.vanished or verdict.gone or not verdict.suspect_pids:
            return None
        out = []
        for pid in verdict.suspect_pids:
            p = pids.get(pid)
            if p is None:
                return None
            entry = {
                "pid": pid,
                "first": [p.first.to_json()],
                "samples": [c.to_json() for c in p.readings],
            }
            j = judge_rank(entry)
            if j is None or j.advancing is not True:
                return None
            out.append(j)
        best = max(out, key=lambda j: j.for_s)
        spun = verdict.t - verdict.since if verdict.since is not None else 0.0
        return best if max(best.for_s, spun) < self.busy_limit else None
