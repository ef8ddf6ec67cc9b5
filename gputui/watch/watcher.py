"""The Watcher: the hang detector, plus evidence gathered at each stall transition and RAS
asked from the start of every spin (gputui.watch.ras_poll).

Why this shape (docs/architecture.md): the detector names a GPU from NVML alone; a person
then wants the line of Python. So when a job goes from ok to stalled, and again from stalled
to hung, the Watcher starts its gatherers (py-spy on every local rank; later NCCL RAS and
the flight recorder) once, off the caller's thread, bounded and cancellable, and folds what
they return into the verdicts that follow. Never per sample, never in a loop: a job whose
alarm cleared and that stalls again is a new transition.

Every gatherer returns a typed record (a JSON-able dict). The record IS the evidence:
`gputui record` writes it into the recording, and a replay hands it back through
`Snapshot.records`, so a replayed Watcher (live=False, nothing gathered) shows the same
findings. Explainers are pure (gputui.diagnose), so live and replay agree.

Layering: above collect, diagnose and tools (it runs tools), below the faces (ui,
commands, exporter), and it never imports textual or the UI (an import-linter contract).

Start-up: the dashboard imports this module before its first frame, so it imports only what
every sample needs. The evidence machinery (explainers, health words, the rendezvous watch,
the rank I/O tracker) is imported where it is first used: at the first update that has
something for it, on the sampler thread, after the first frame is on screen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gputui.collect.model import Job, ProcessInfo, Snapshot
from gputui.diagnose.verdict import HUNG, OK, STALLED, Verdict
from gputui.watch.busy import BusyWatch
from gputui.watch.gatherers import (  # re-exported: callers import them from here
    AUTO_DUMP_TIMEOUT_S,
    BUSY_LIMIT_S,
    DEFAULT_GATHERERS,
    EXPLAIN_ONLY,
    Explain,
    Gather,
    JobTarget,
    explain_lastwords,
    explain_nccl,
    explain_progress,
    explain_stacks,
    gather_lastwords,
    gather_nccl,
    gather_stacks,
)
from gputui.watch.records import RecordStore

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from gputui.collect.procs.rankio import RankIOTracker
    from gputui.diagnose.evidence import Evidence
    from gputui.diagnose.hang.detector import Detector
    from gputui.diagnose.health.judge import HealthTracker
    from gputui.tools.gather.rendezvous import RendezvousWatch

# A record taken this long before a job's spinning began still belongs to that episode
# (clocks of the sampler and the gatherer differ a little); older ones are a past episode.
EPISODE_SLACK_S = 5.0
CLOSE_WAIT_S = 3.0


__all__ = [
    "AUTO_DUMP_TIMEOUT_S",
    "DEFAULT_GATHERERS",
    "Explain",
    "Gather",
    "JobTarget",
    "Watcher",
    "explain_lastwords",
    "explain_nccl",
    "explain_progress",
    "explain_stacks",
    "gather_lastwords",
    "gather_nccl",
    "gather_stacks",
]


class Watcher:
    """The detector's verdicts, enriched with the latest evidence about the stalled job.

    `update()` is called by one thread (the sampler, or a CLI loop) and never blocks;
    gatherers run in one worker thread per kind, so a slow kind does not hold up another.
    """

    def __init__(
        self,
        stall_after: float = 10.0,
        hang_after: float = 60.0,
        *,
        auto_dump: bool = True,
        gatherers: Sequence[tuple[str, Gather, Explain]] = DEFAULT_GATHERERS,
        live: bool = True,
        host_ranks: bool = True,
        busy_limit: float = BUSY_LIMIT_S,
    ) -> None:
        self._detector: Detector | None = None  # made at the first update (start-up)
        self.stall_after, self.hang_after = stall_after, hang_after
        self.busy_limit = busy_limit  # a busy phase longer than this is an alarm again
        self.live = live
        self.explainers = {kind: explain for kind, _g, explain in gatherers}
        self.explainers.update(EXPLAIN_ONLY)  # the blamed GPU's probe, added by the faces
        self.gatherers = [
            (kind, gather)
            for kind, gather, _e in gatherers
            if live and (auto_dump or kind != "stacks")
        ]
        self.on_evidence: Callable[[], object] | None = None  # its result is ignored
        self._cancel = threading.Event()
        # NCCL RAS, asked from the start of a spin and again while it lasts (gputui.watch.ras_poll),
        # wherever the NCCL evidence kind is on; its records replay like the others.
        self.ras = None
        if "nccl" in self.explainers:
            self.explainers["ras"] = explain_nccl
            if live:
                from gputui.watch.ras_poll import RasPoller

                self.ras = RasPoller(self._record, self._cancel)
        # Whether the rank the others wait for advances (a checkpoint, a compile): its
        # counters and frames from the start of every spin (gputui.tools.gather.progress);
        # its records replay like the others. Made at the first spin (start-up).
        self.explainers["progress"] = explain_progress
        self.busy = BusyWatch(self._record, self._cancel, live, auto_dump, busy_limit)
        # A rank that dies: its last words at once, no stall clock (gputui.watch.deaths).
        from gputui.watch.deaths import DeathWatch

        self.deaths = DeathWatch(self._gather_lastwords if live else None)
        # A job that vanished whole (its launcher or the NCCL watchdog ended the others):
        # called on its last words (gputui.watch.vanished).
        from gputui.watch.vanished import VanishWatch

        self.vanish = VanishWatch(self._gather_vanished if live else None, _alive)
        self._ended: Verdict | None = None
        from gputui.watch.watchdog_seen import WatchdogSeen

        self.watchdog = WatchdogSeen()
        from gputui.watch.mismatch_early import MismatchEarly

        self.mismatch = MismatchEarly()
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._futures: list[Future[Any]] = []
        self.records = RecordStore()  # kept for the verdicts, queued for `gputui record`
        self._state: dict[str, str] = {}  # job key -> "stalled" | "hung", while its alarm lasts
        self._gone: dict[str, tuple[Any, Any]] = {}  # job key -> (vanished, gone) last seen
        self._seen: dict[str, dict[int, ProcessInfo]] = {}  # job key -> GPU -> last process
        self._cache: tuple[Any, list[Evidence]] | None = None
        self._last: tuple[Verdict, Snapshot] | None = None
        self.transitions = 0  # how many times gathering was started (for tests and the UI)
        self._health: HealthTracker | None = None  # made when first asked for
        # Where each rank writes, remembered while alive (a gone rank's log is found by it):
        # made at the first sample with a job.
        self._wants_rankio = any(kind == "lastwords" for kind, _g in self.gatherers)
        self.rankio: RankIOTracker | None = None
        # Ranks that never came: a job waiting in its rendezvous holds no GPU to spin. Made
        # at the first update: its host scan must not compete with the first frame.
        # `host_ranks=False`: the snapshots are not this host's (a test feeding synthetic
        # samples), so the host's own waiting ranks must not become this Watcher's verdict.
        self._wants_rendezvous = host_ranks and (self._wants_rankio or not live)
        self._auto_dump = auto_dump
        self.rendezvous: RendezvousWatch | None = None

    @property
    def detector(self) -> Detector:
        """The NVML hang detector (gputui.diagnose.hang.detector), made when first used."""
        d = self._detector
        if d is None:
            from gputui.diagnose.hang.detector import Detector

            d = self._detector = Detector(self.stall_after, self.hang_after)
        return d

    @property
    def health(self) -> HealthTracker:
        """Every GPU's health, from the snapshots' records (gputui.diagnose.health.judge)."""
        h = self._health
        if h is None:
            from gputui.diagnose.health.judge import HealthTracker

            h = self._health = HealthTracker()
        return h

    @property
    def health_made(self) -> HealthTracker | None:
        """The health tracker once an update made it; None before (the first frame draws
        without importing it)."""
        return self._health

    @property
    def marks(self) -> dict[int, Any]:
        """The GPUs whose health is not ok, for the GPU panels; {} before the first update
        (the dashboard's first frame draws before it)."""
        return self._health.marks if self._health is not None else {}

    def _start_helpers(self, snap: Snapshot) -> None:
        """The rank I/O tracker and the rendezvous watch, once there is work for them (never
        after close(): their threads would outlive the Watcher)."""
        rankio_done = self.rankio is not None or not self._wants_rankio
        if rankio_done and (self.rendezvous is not None or not self._wants_rendezvous):
            return  # both made, or not wanted (every sample after the first few)
        if self._cancel.is_set():
            return
        if self.rankio is None and self._wants_rankio and snap.jobs:
            from gputui.collect.procs.rankio import RankIOTracker

            self.rankio = RankIOTracker()
            if self._cancel.is_set():  # closed meanwhile (from another thread): stop it too
                self.rankio.close()
        if self.rendezvous is None and self._wants_rendezvous:
            from gputui.tools.gather.rendezvous import RendezvousWatch

            self.rendezvous = RendezvousWatch(self.live, self.hang_after, stacks=self._auto_dump)
            if self._cancel.is_set():  # closed meanwhile (from another thread): stop it too
                self.rendezvous.close()

    # ------------------------------------------------------------ per sample

    def update(self, snap: Snapshot) -> Verdict:
        v = self.detector.update(snap)
        self.health.update(snap)
        self._start_helpers(snap)
        if self.rankio is not None:
            self.rankio.observe(snap)  # never blocks: a refresh every few seconds, off-thread
        self._remember(snap)
        for rec in snap.records:
            self._keep(rec)
        if self.rendezvous is not None and not v.alarm:
            rv, new = self.rendezvous.update(snap)
            if new is not None:
                self.records.queue(new)
            if rv is not None:
                from gputui.diagnose.hang.rendezvous import with_rendezvous

                self._last = (with_rendezvous(v, rv), snap)
                return self._last[0]
        job = _job_of(v, snap) if v.alarm else None
        self._poll_ras(v, snap, job)
        self.busy.poll(v, snap, job, self.detector)
        early = None if job else self.busy.early(snap, self.detector, self._newest, self.explainers)
        if early is None and job is None:  # RAS twice on mismatched collectives: call it now
            early = self.mismatch.early(snap, self.detector, self._newest, self.explainers)
        if early is None and job is None:  # the NCCL watchdog timed out a live rank
            early = self.watchdog.poll(snap, self.rankio)
        if early is not None:
            v, job = early, _job_of(early, snap)
        died = None if job else self.deaths.poll(snap, self.detector, self._newest, self.explainers)
        if died is not None:
            v, job = died
        ended = self.vanish.poll(snap, self._newest, self.explainers)
        if ended is not None and job is None and not v.alarm:
            self._ended = ended
            self._last = (ended, snap)
            return ended
        if job is None:
            self._state.clear()
            self._prune(snap.t)
            v = self._beside_stragglers(v, snap)
            self._last = (v, snap)
            return v
        out = self._enrich(v, snap, job)
        if out.alarm:  # not when RAS shows the job's collectives advancing: it is busy
            self._transition(v, snap, job)
            out = self._enrich(v, snap, job)  # a gatherer may have answered already
        else:
            self._state.pop(job.key, None)
        self._last = (v, snap)
        return out

    def _beside_stragglers(self, v: Verdict, snap: Snapshot) -> Verdict:
        """A slow verdict names its stragglers' links whose error rates stand out."""
        h = self._health
        if not v.stragglers or h is None or not h.links.findings():
            return v
        from gputui.diagnose.health.findings import with_links

        return with_links(v, h, snap)  # type: ignore[no-any-return]

    def _poll_ras(self, v: Verdict, snap: Snapshot, alarm: Job | None) -> None:
        """Ask RAS for every job whose GPUs spin now, before the stall is called."""
        if self.ras is None:
            return
        spinning = set(self.detector.runs)
        jobs = {j.key: (j, "spin") for j in snap.jobs if spinning & set(j.gpus)}
        if alarm is not None:
            jobs[alarm.key] = (alarm, v.state)
        if jobs:  # no spinning job (most samples): no process index to build
            procs = {p.pid: p for p in snap.processes}
            for key, (job, trigger) in jobs.items():
                self.ras.poll(key, tuple(procs[p] for p in job.pids if p in procs), trigger)
        self.ras.end(set(jobs))

    def latest(self) -> Verdict | None:
        """The last verdict with the evidence known now (e.g. after `wait()` at the end, or
        from `on_evidence`, so a UI can show a dump before the next sample)."""
        if self._last is None:
            return None
        v, snap = self._last
        if v is self._ended:  # a vanished job's call: its job is no longer listed
            return v
        return self._enrich(v, snap, _job_of(v, snap) if v.alarm else None)

    def _transition(self, v: Verdict, snap: Snapshot, job: Job) -> None:
        before = self._state.get(job.key)
        self._state[job.key] = v.state
        self._gone_changed(before, v, snap, job)
        if before == v.state or before == HUNG or not self.gatherers or self._cancel.is_set():
            return  # nothing new, nothing to run, or closed
        if v.state not in (STALLED, HUNG):
            return
        target = self._target(v, snap, job)
        self.transitions += 1
        for kind, gather in self.gatherers:
            pool = self._pools.get(kind)
            if pool is None:
                from concurrent.futures import ThreadPoolExecutor

                pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"gputui-{kind}")
                self._pools[kind] = pool
            self._futures.append(pool.submit(self._run, gather, target))
        self._futures = [f for f in self._futures if not f.done()]

    def _gone_changed(self, before: str | None, v: Verdict, snap: Snapshot, job: Job) -> None:
        """A rank that leaves while the job is already stalled: its last words are read
        again now (only those: the other kinds wait for the next transition)."""
        gone = (v.vanished, v.gone)
        changed = before in (STALLED, HUNG) and gone != self._gone.get(job.key, gone)
        self._gone[job.key] = gone
        pool = self._pools.get("lastwords")
        gather = next((g for k, g in self.gatherers if k == "lastwords"), None)
        if changed and pool is not None and gather is not None and not self._cancel.is_set():
            self._futures.append(pool.submit(self._run, gather, self._target(v, snap, job)))

    def _gather_lastwords(self, v: Verdict, snap: Snapshot, job: Job) -> None:
        """A rank of `job` has just gone: its last words are read now (gputui.watch.deaths)."""
        self._submit_lastwords(self._target(v, snap, job))

    def _gather_vanished(self, v: Verdict, job: Job, members: Sequence[Any]) -> None:
        """Every rank of `job` has gone at once: their last words are read now."""
        from gputui.collect.frames import RankStack

        err = "its process exited before the dump"
        gone = tuple(RankStack(m.pid, m.rank, m.gpu, "gone", error=err) for m in members)
        xids = tuple(self._health.events) if self._health is not None else ()
        self._submit_lastwords(
            JobTarget(job.key, job.label, v.state, v, (), gone, self.rankio, xids=xids)
        )

    def _submit_lastwords(self, target: JobTarget) -> None:
        """Reads `target`'s last words off the tick, in one worker started on the first death
        (nothing when no last-words gatherer is registered or the watcher is stopping)."""
        gather = next((g for k, g in self.gatherers if k == "lastwords"), None)
        if gather is None or self._cancel.is_set():
            return
        pool = self._pools.get("lastwords")
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gputui-lastwords")
            self._pools["lastwords"] = pool
        self._futures.append(pool.submit(self._run, gather, target))

    def _run(self, gather: Gather, target: JobTarget) -> None:
        if self._cancel.is_set():
            return
        try:
            rec = gather(target, self._cancel)
        except Exception as e:  # a gatherer that breaks its contract must not kill the thread
            rec = {"type": "error", "t": time.time(), "job": target.key, "error": repr(e)[:200]}
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            return
        rec.setdefault("job", target.key)
        rec.setdefault("trigger", target.trigger)
        self._record(rec)

    def _record(self, rec: dict[str, Any]) -> None:
        """A gathered record: kept for the verdicts, queued for `gputui record`, announced."""
        self._keep(rec)
        self.records.queue(rec)
        cb = self.on_evidence
        if cb is not None:
            try:
                cb()
            except Exception:  # noqa: S110 - a UI callback's bug must not lose the record
                pass

    def _target(self, v: Verdict, snap: Snapshot, job: Job) -> JobTarget:
        from gputui.collect.frames import RankStack

        procs = {p.pid: p for p in snap.processes}
        ranks = tuple(procs[p] for p in job.pids if p in procs and procs[p].live)
        seen = self._seen.get(job.key, {})
        gone = []
        for gpu in v.vanished:
            last = seen.get(gpu)
            if last is not None and last.pid in procs:
                continue  # still alive (it left the GPU, not the node): dumped with the others
            r = last.rank.rank if last is not None and last.rank is not None else None
            err = "its process exited before the dump"
            pid = last.pid if last is not None else None
            gone.append(RankStack(pid, r, gpu, "gone", error=err))
        # The Xids the kernel and NVML reported (from before gputui started too): one names
        # the pid of a rank that died before it was seen (gputui.tools.gather.late_words).
        xids = tuple(self._health.events) if self._health is not None else ()
        return JobTarget(job.key, job.label, v.state, v, ranks, tuple(gone), self.rankio, xids=xids)

    # ------------------------------------------------------------ evidence

    def _newest(self, kind: str, job: Job, start: float) -> dict[str, Any] | None:
        """The newest record of `kind` for `job` taken since `start` (for the early call)."""
        got = dict(self.records.newest((kind,), job.key, set(job.pids), start))
        return got.get(kind)

    def _keep(self, rec: dict[str, Any]) -> None:
        self.records.keep(rec, self.explainers)

    def _prune(self, now: float) -> None:
        """No alarm: records too old for any future episode can go (memory stays bounded)."""
        self.records.prune(now - self.stall_after - EPISODE_SLACK_S - 10.0)

    def _evidence(self, v: Verdict, snap: Snapshot, job: Job) -> list[tuple[str, dict]]:
        """The newest record of each kind for this job, taken in this spin episode."""
        start = (v.since if v.since is not None else v.t) - EPISODE_SLACK_S
        return self.records.newest(self.explainers, job.key, {*job.pids, *v.suspect_pids}, start)

    def _enrich(self, v: Verdict, snap: Snapshot, job: Job | None) -> Verdict:
        if job is None:
            return v
        from gputui.diagnose.evidence import Evidence, fold
        from gputui.diagnose.health.findings import health_evidence, with_health_headline

        # A failed GPU or a rank's Xid leads the verdict (gputui.diagnose.health.findings).
        seen = self._seen.get(job.key)
        hw = [e for e in (health_evidence(self.health, v, snap, job, seen),) if e is not None]
        recs = self._evidence(v, snap, job)
        if not recs:
            return with_health_headline(fold(v, hw)) if hw else v
        # Explain again only when the records or the judgement change, not every sample.
        ids = tuple((k, r["t"], id(r)) for k, r in recs)
        key = (ids, v.state, v.spinning, v.suspects, v.vanished)
        if self._cache is not None and self._cache[0] == key:
            return self.busy.judged(v, snap, self._cache[1], hw, _busy(v, self._cache[1]))
        ev = []
        for kind, rec in recs:
            try:
                ev.append(self.explainers[kind](rec, v, snap))
            except Exception as e:  # an explainer's bug must not take the verdict with it
                ev.append(Evidence(kind, findings=(f"{kind}: could not be explained ({e})",)))
        self._cache = (key, ev)
        return self.busy.judged(v, snap, ev, hw, _busy(v, ev))

    def _remember(self, snap: Snapshot) -> None:
        """The last process seen on each GPU of each job: a rank that dies is named by it."""
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
            for key in [k for k in self._seen if k not in keys and k not in self._state]:
                del self._seen[key]

    # ------------------------------------------------------------ for the faces

    def pending(self) -> bool:
        """A gatherer is still running (or queued)."""
        ras = self.ras.pending() if self.ras is not None else False
        return ras or self.busy.pending() or any(not f.done() for f in self._futures)

    def wait(self, timeout: float) -> bool:
        """Wait until no gatherer runs, at most `timeout` s; True when none runs."""
        deadline = time.monotonic() + timeout
        extra = [self.ras.future() if self.ras is not None else None]
        extra.append(self.busy.future())
        for f in [*self._futures, *(f for f in extra if f is not None)]:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                f.result(timeout=left)
            except Exception:  # noqa: S110 - _run never raises; a timeout is handled below
                pass
        return not self.pending()

    def evidence_records(self) -> list[dict[str, Any]]:
        """Every evidence record held now (gathered or replayed), oldest first: an incident
        bundle writes them into its trace, so that the trace replays to the same verdict."""
        return self.records.held()

    def add_record(self, rec: dict[str, Any]) -> None:
        """A record made outside the gatherers (the blamed GPU's probe, gputui.probe.blamed):
        kept for the verdicts and queued for `gputui record`, like a gathered one."""
        self._record(rec)

    def take_records(self) -> list[dict[str, Any]]:
        """Records gathered since the last call, oldest first, for `gputui record` to write."""
        return self.records.take()

    def close(self) -> None:
        """Cancel running gatherers (their tools are killed) and let their threads end."""
        self._cancel.set()
        if self.rankio is not None:
            self.rankio.close()
        if self.rendezvous is not None:
            self.rendezvous.close()
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        if self.ras is not None:
            self.ras.close()
        self.busy.close()
        self.wait(CLOSE_WAIT_S)


def _alive(pid: int, create_time: float | None) -> bool:
    from gputui.collect.procs.rankio import alive

    return alive(pid, create_time)


def _job_of(v: Verdict, snap: Snapshot) -> Job | None:
    """The job the verdict is about: by its label, else the job on its spinning GPUs; a
    node-wide group (environments unreadable) when no job claims them."""
    gpus = set(v.spinning)
    for job in snap.jobs:  # a dead rank's job may not spin yet (gputui.watch.deaths)
        if job.label == v.job and (gpus & set(job.gpus) or not gpus):
            return job
    for job in snap.jobs:
        if gpus & set(job.gpus):
            return job
    on = set(v.spinning) | set(v.suspects)
    pids = tuple(sorted({p for g in snap.gpus if g.index in on for p in g.pids}))
    return Job(key="~node", label=v.job or "node", pids=pids, gpus=tuple(sorted(on)))


def _busy(v: Verdict, evidence: list[Evidence]) -> Verdict | None:
    """An ok verdict when NCCL RAS shows the job's collectives advancing between two answers
    and names no rank behind and no mismatch: a job that only communicates (an all_reduce
    benchmark, a parameter server) spins to NVML's eyes, but it is busy, not stalled."""
    for e in evidence:
        x = e.extra if e.kind == "ras" else {}
        if not x.get("progress") or x.get("mismatch") or x.get("behind") or x.get("missing"):
            continue
        # One steady sentence: the counts change every answer, and a new `check --json`
        # line every 3 s for a healthy job would be noise (they are under "nccl" in JSON).
        return replace(
            v,
            state=OK,
            reason=(
                "busy, not stalled: NCCL RAS shows its collectives advancing (a job that only "
                "communicates looks like a hang to NVML)"
            ),
            suspects=(),
            suspect_pids=(),
            next_steps=(),
            findings=(),
            evidence={"ras": x},
        )
    return None
