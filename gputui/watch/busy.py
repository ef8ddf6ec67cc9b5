"""The Watcher's part in "progress is not a hang": it follows the rank the others wait for
from the start of every spin, makes a stalled verdict busy while that rank advances (up to
--busy-limit), and calls a stall early when the evidence is plain.

Why apart from gputui.watch.watcher: the Watcher runs the gatherers of a stall transition; this runs
from the first spinning sample, like the RAS poller (gputui.watch.ras_poll), and decides whether
there is a stall at all. The judgement is pure (gputui.diagnose.hang.progress); the counters and
frames come from gputui.tools.gather.progress as `progress` records, so `gputui record` keeps
them and a replay (which gathers nothing) judges the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gputui.collect.model import Job, Snapshot
from gputui.collect.pacing import lasted
from gputui.diagnose.verdict import Verdict
from gputui.watch.records import EPISODE_SLACK_S

if TYPE_CHECKING:
    from gputui.diagnose.evidence import Evidence
    from gputui.diagnose.hang.detector import Detector
    from gputui.tools.gather.progress import ProgressPoller


class BusyWatch:
    """Busy or stalled, for one Watcher. `poll` and `early` run on the Watcher's caller
    thread and never block; the poller's readings run on its own thread."""

    def __init__(
        self,
        emit: Callable[[dict[str, Any]], None],
        cancel: threading.Event,
        live: bool,
        stacks: bool,
        busy_limit: float,
    ) -> None:
        self.emit, self.cancel = emit, cancel
        self.live, self.stacks, self.busy_limit = live, stacks, busy_limit
        self.progress: ProgressPoller | None = None  # made at the first spin (start-up)
        self._early: set[str] = set()  # jobs called stalled before stall_after
        self._named: dict[str, tuple[int, ...]] = {}  # job -> local pids RAS names behind
        self._tried: dict[str, tuple[int, int]] = {}  # job -> the records last judged early

    # ------------------------------------------------------------ per sample

    def poll(self, v: Verdict, snap: Snapshot, alarm: Job | None, detector: Detector) -> None:
        """Follow the counters (and frames) of each spinning job's ranks that do not spin,
        and of those RAS names as behind, from the start of the spin."""
        spinning = set(detector.runs)
        jobs = {j.key: (j, "spin") for j in snap.jobs if not spinning.isdisjoint(j.gpus)}
        if alarm is not None:
            jobs[alarm.key] = (alarm, v.state)
        if self._early or self._named or self._tried:  # jobs followed that may have ended
            for key in [k for k in (*self._early, *self._named, *self._tried) if k not in jobs]:
                self._early.discard(key)
                self._named.pop(key, None)
                self._tried.pop(key, None)
        if not self.live or self.cancel.is_set():
            return
        if jobs and self.progress is None:
            from gputui.tools.gather.progress import ProgressPoller

            self.progress = ProgressPoller(self.emit, self.cancel, stacks=self.stacks)
        if self.progress is None:
            return
        if jobs:
            from gputui.tools.gather.progress import Watched

            procs = {p.pid: p for p in snap.processes}
            for key, (job, trigger) in jobs.items():
                named = self._named.get(key, ())
                watched = []
                for pid in job.pids:
                    p = procs.get(pid)
                    if p is None or not p.live:
                        continue
                    spins = bool(set(p.gpus) & spinning)
                    if not spins or pid in named:
                        gpu = p.gpus[0] if p.gpus else None
                        watched.append(Watched(p, gpu, dump=not spins))
                self.progress.poll(key, watched, trigger)
        self.progress.end(set(jobs))

    def early(
        self,
        snap: Snapshot,
        detector: Detector,
        newest: Callable[[str, Job, float], dict[str, Any] | None],
        explainers: dict[str, Any],
    ) -> Verdict | None:
        """A stalled verdict before --stall-after, when the evidence is plain: NCCL RAS names
        a local rank behind, its count unchanged across two answers, and that rank makes no
        progress (no bytes, no CPU with moving frames) in the newest progress record; the
        spin has lasted EARLY_S. Once called, the job stays called until its spin ends."""
        d = detector
        if not d.runs:
            return None  # nothing spins (most samples): not even the import below
        from gputui.diagnose.hang.progress import EARLY_S, KIND, no_progress

        if "ras" not in explainers or KIND not in explainers:
            return None
        for job in snap.jobs:
            runs = [d.runs[g] for g in job.gpus if g in d.runs]
            if not runs:
                continue
            since = min(r.since for r in runs)
            if job.key not in self._early:
                if not lasted(snap.t - since, EARLY_S):
                    continue
                ras = newest("ras", job, since - EPISODE_SLACK_S)
                prog = newest(KIND, job, since - EPISODE_SLACK_S)
                if ras is None or prog is None:
                    continue
                ids = (id(ras), id(prog))
                if self._tried.get(job.key) == ids:
                    continue  # these records said no already
                self._tried[job.key] = ids
                v0 = Verdict(t=snap.t, since=since, job=job.label)
                try:
                    named = explainers["ras"](ras, v0, snap).suspect_pids
                    self._named[job.key] = named
                    judged = explainers[KIND](prog, v0, snap)
                except Exception:  # noqa: S112 - an explainer's bug: no early call, that is all
                    continue
                if not no_progress(judged, named):
                    continue
                self._early.add(job.key)
            v = d.judge_now(job.key, snap)
            if v is not None:
                return v
        return None

    def judged(
        self,
        v: Verdict,
        snap: Snapshot,
        ev: list[Evidence],
        hw: list[Evidence],
        ras_busy: Verdict | None,
    ) -> Verdict:
        """The evidence folded in; busy (no alarm) while the rank the others wait for
        advances, up to --busy-limit (gputui.diagnose.hang.progress)."""
        from gputui.diagnose.evidence import fold
        from gputui.diagnose.health.findings import with_health_headline

        if ras_busy is not None:
            return ras_busy
        # A rank that spins, or whose side thread holds the GIL, is said from the progress
        # dumps first: "rank 1 spins in poll_ready (...), 1.0 core, nothing advances" says
        # more than the stacks' "rank 1 is in poll_ready (...)" of equal strength.
        ev = sorted(ev, key=lambda e: e.kind != "progress")
        if any(e.kind == "progress" for e in ev):
            from gputui.diagnose.hang.progress import (
                busy_json,
                busy_phase,
                busy_verdict,
                past_limit,
            )

            phase = busy_phase(v, [*ev, *hw], snap)
            if phase is not None and phase.for_s < self.busy_limit:
                prog = next(e for e in ev if e.kind == "progress")
                return busy_verdict(v, phase, prog.extra)
            if phase is not None:
                # First among its equals: it says more than "rank 1 is in save_checkpoint".
                out = with_health_headline(fold(v, [past_limit(phase, self.busy_limit), *ev, *hw]))
                return replace(out, busy=busy_json(phase))
        return with_health_headline(fold(v, [*ev, *hw]))

    # ------------------------------------------------------------ lifecycle

    def settled(self) -> bool:
        """No job followed, called early or named by RAS, and nothing running: a sample
        with no spin and no alarm changes nothing here (a replay's quiet step)."""
        return not (self._early or self._named or self._tried or self.pending())

    def pending(self) -> bool:
        return self.progress is not None and self.progress.pending()

    def future(self) -> Future[None] | None:
        return self.progress.future() if self.progress is not None else None

    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()
