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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gputui.collect.model import Job, Snapshot
from gputui.diagnose.states import is_alarm
from gputui.diagnose.verdict import HUNG, Verdict
from gputui.watch.busy import BusyWatch
from gputui.watch.fold import EvidenceFold
from gputui.watch.gatherers import (  # re-exported: callers import them from here
    AUTO_DUMP_TIMEOUT_S,
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
from gputui.watch.gathering import Gathering
from gputui.watch.host_helpers import HostHelpers
from gputui.watch.judge import Judge
from gputui.watch.records import EPISODE_SLACK_S, RecordStore
from gputui.watch.settings import WatchSettings
from gputui.watch.targets import LastSeen, gone_target, job_of, target_of

if TYPE_CHECKING:
    from gputui.collect.procs.rank_tracker import RankIOTracker
    from gputui.diagnose.health.judge import HealthTracker
    from gputui.tools.gather.rendezvous import RendezvousWatch

CLOSE_WAIT_S = 3.0


__all__ = [
    "AUTO_DUMP_TIMEOUT_S",
    "DEFAULT_GATHERERS",
    "Explain",
    "Gather",
    "JobTarget",
    "WatchSettings",
    "Watcher",
    "explain_lastwords",
    "explain_nccl",
    "explain_progress",
    "explain_stacks",
    "gather_lastwords",
    "gather_nccl",
    "gather_stacks",
]


class Watcher(Judge):
    """The detector's verdicts, enriched with the latest evidence about the stalled job.

    `update()` is called by one thread (the sampler, or a CLI loop) and never blocks;
    gatherers run in one worker thread per kind, so a slow kind does not hold up another.
    The faces make one through `gputui.watch.run.WatchRun`, which also closes it.
    """

    def __init__(
        self, settings: WatchSettings | float | None = None, *loose: Any, **options: Any
    ) -> None:
        """`settings`: every option in one object (gputui.watch.settings). The loose form
        `Watcher(stall_after, hang_after, live=..., ...)` builds the same settings, for the
        tests and scripts that make a Watcher by hand."""
        s = WatchSettings.of(settings, *loose, **options)
        super().__init__(s)  # the detector, made at the first update (start-up)
        live, auto_dump, gatherers = s.live, s.auto_dump, s.gatherers
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
        self.busy = BusyWatch(self._record, self._cancel, live, auto_dump, s.busy_limit)
        # A rank that dies: its last words at once, no stall clock (gputui.watch.deaths).
        from gputui.watch.deaths import DeathWatch

        self.deaths = DeathWatch(self._gather_lastwords if live else None)
        # A job that vanished whole (its launcher or the NCCL watchdog ended the others):
        # called on its last words (gputui.watch.vanished).
        from gputui.watch.vanished import VanishWatch

        self.vanish = VanishWatch(self._gather_vanished if live else None)
        self._ended: Verdict | None = None
        from gputui.watch.watchdog_seen import WatchdogSeen

        self.watchdog = WatchdogSeen()
        from gputui.watch.mismatch_early import MismatchEarly

        self.mismatch = MismatchEarly()
        self._gathering = Gathering(self._record, self._cancel)
        self.records = RecordStore()  # kept for the verdicts, queued for `gputui record`
        self._fold = EvidenceFold(self.records, self.explainers)
        self._state: dict[str, str] = {}  # job key -> "stalled" | "hung", while its alarm lasts
        self._gone: dict[str, tuple[Any, Any]] = {}  # job key -> (vanished, gone) last seen
        self._seen = LastSeen()  # job key -> GPU -> last process
        self._last: tuple[Verdict, Snapshot] | None = None
        self.transitions = 0  # how many times gathering was started (for tests and the UI)
        self._health: HealthTracker | None = None  # made when first asked for
        # Where each rank writes (for the last-words gatherer), and ranks that never came,
        # made at the first update (gputui.watch.host_helpers). `host_ranks=False`: the
        # snapshots are not this host's (a test feeding synthetic samples), so the host's
        # own waiting ranks must not become this Watcher's verdict.
        rankio = any(kind == "lastwords" for kind, _g in self.gatherers)
        self._helpers = HostHelpers(
            self._cancel,
            rankio=rankio,
            rendezvous=s.host_ranks and (rankio or not live),
            live=live,
            hang_after=s.hang_after,
            stacks=auto_dump,
        )

    @property
    def rankio(self) -> RankIOTracker | None:
        """Where each rank writes (gputui.collect.procs.rank_tracker), once made."""
        return self._helpers.rankio

    @property
    def rendezvous(self) -> RendezvousWatch | None:
        """The watch for ranks that never came (gputui.tools.gather.rendezvous), once made."""
        return self._helpers.rendezvous

    @property
    def alarms(self) -> dict[str, str]:
        """Job key -> "stalled" | "hung", while its alarm lasts (the quiet step reads it)."""
        return self._state

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

    # ------------------------------------------------------------ per sample

    def update(self, snap: Snapshot) -> Verdict:
        v = self.detector.update(snap)
        self.health.update(snap)
        self._helpers.start(snap)
        if self.rankio is not None:
            self.rankio.observe(snap)  # never blocks: a refresh every few seconds, off-thread
        self._seen.remember(snap, self._state)
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
        job = job_of(v, snap) if v.alarm else None
        if self.ras is not None:  # RAS for every job that spins, before the stall is called
            self.ras.poll_spinning(snap, self.detector.runs, job, v.state)
        self.busy.poll(v, snap, job, self.detector)
        newest = self._fold.newest
        early = None if job else self.busy.early(snap, self.detector, newest, self.explainers)
        if early is None and job is None:  # RAS twice on mismatched collectives: call it now
            early = self.mismatch.early(snap, self.detector, newest, self.explainers)
        if early is None and job is None:  # the NCCL watchdog timed out a live rank
            early = self.watchdog.poll(snap, self.rankio)
        if early is not None:
            v, job = early, job_of(early, snap)
        died = None if job else self.deaths.poll(snap, self.detector, newest, self.explainers)
        if died is not None:
            v, job = died
        ended = self.vanish.poll(snap, newest, self.explainers)
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

    def latest(self) -> Verdict | None:
        """The last verdict with the evidence known now (e.g. after `wait()` at the end, or
        from `on_evidence`, so a UI can show a dump before the next sample)."""
        if self._last is None:
            return None
        v, snap = self._last
        if v is self._ended:  # a vanished job's call: its job is no longer listed
            return v
        return self._enrich(v, snap, job_of(v, snap) if v.alarm else None)

    def _transition(self, v: Verdict, snap: Snapshot, job: Job) -> None:
        before = self._state.get(job.key)
        self._state[job.key] = v.state
        self._gone_changed(before, v, snap, job)
        if before == v.state or before == HUNG or not self.gatherers or self._cancel.is_set():
            return  # nothing new, nothing to run, or closed
        if not v.alarm:
            return
        target = self._target(v, snap, job)
        self.transitions += 1
        for kind, gather in self.gatherers:
            self._gathering.submit(kind, gather, target)
        self._gathering.forget_done()

    def _gone_changed(self, before: str | None, v: Verdict, snap: Snapshot, job: Job) -> None:
        """A rank that leaves while the job is already stalled: its last words are read
        again now (only those: the other kinds wait for the next transition)."""
        gone = (v.vanished, v.gone)
        changed = is_alarm(before) and gone != self._gone.get(job.key, gone)
        self._gone[job.key] = gone
        if changed and self._gathering.has_pool("lastwords"):
            self._submit_lastwords(self._target(v, snap, job))

    def _gather_lastwords(self, v: Verdict, snap: Snapshot, job: Job) -> None:
        """A rank of `job` has just gone: its last words are read now (gputui.watch.deaths)."""
        self._submit_lastwords(self._target(v, snap, job))

    def _gather_vanished(self, v: Verdict, job: Job, members: Sequence[Any]) -> None:
        """Every rank of `job` has gone at once: their last words are read now."""
        self._submit_lastwords(gone_target(v, job, members, self.rankio, self._xids()))

    def _submit_lastwords(self, target: JobTarget) -> None:
        """Reads `target`'s last words off the tick, in one worker started on the first death
        (nothing when no last-words gatherer is registered or the watcher is stopping)."""
        gather = next((g for k, g in self.gatherers if k == "lastwords"), None)
        if gather is not None:
            self._gathering.submit("lastwords", gather, target)

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
        seen = self._seen.of(job.key) or {}
        return target_of(v, snap, job, seen, self.rankio, self._xids())

    def _xids(self) -> tuple[Any, ...]:
        """The Xids known now (a gatherer's target carries them: gputui.watch.targets)."""
        return tuple(self._health.events) if self._health is not None else ()

    # ------------------------------------------------------------ evidence

    def _keep(self, rec: dict[str, Any]) -> None:
        self._fold.keep(rec)

    def _prune(self, now: float) -> None:
        """No alarm: records too old for any future episode can go (memory stays bounded)."""
        self._fold.prune(now - self.settings.stall_after - EPISODE_SLACK_S - 10.0)

    def _enrich(self, v: Verdict, snap: Snapshot, job: Job | None) -> Verdict:
        if job is None:
            return v
        seen = self._seen.of(job.key)
        return self._fold.enrich(v, snap, job, self.health, seen, self.busy)

    # ------------------------------------------------------------ for the faces

    def pending(self) -> bool:
        """A gatherer is still running (or queued)."""
        ras = self.ras.pending() if self.ras is not None else False
        return ras or self.busy.pending() or self._gathering.pending()

    def settle_ranks(self, timeout: float) -> None:
        """Wait, at most `timeout` s, until where each rank seen writes is remembered (the
        rank tracker's first look runs off-thread; a live `check` waits before its first
        line, so that a rank dying right after it still has its last words found)."""
        if self.rankio is not None:
            self.rankio.settle(timeout)

    def wait(self, timeout: float) -> bool:
        """Wait until no gatherer runs, at most `timeout` s; True when none runs."""
        extra = [self.ras.future() if self.ras is not None else None, self.busy.future()]
        self._gathering.wait(timeout, extra)
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

    @property
    def closed(self) -> bool:
        """close() was called: no gatherer starts any more."""
        return self._cancel.is_set()

    def close(self) -> None:
        """Cancel running gatherers (their tools are killed) and let their threads end."""
        self._cancel.set()
        self._helpers.close()
        self._gathering.shutdown()
        if self.ras is not None:
            self.ras.close()
        self.busy.close()
        self.wait(CLOSE_WAIT_S)
