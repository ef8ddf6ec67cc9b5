"""A job that vanished whole: every rank gone between two samples.

gputui.watch.deaths calls a job whose rank died while the others run on. But a launcher ends
the other ranks as soon as one fails (torchrun's agent checks every 0.1 s by default), and
the NCCL watchdog ends the waiting ranks after its timeout: then the whole job leaves at
once, no peer is ever seen spinning, and the job simply stops being listed. Said nothing,
that reads as a normal end and exits 0. Here the sample in which a job stops being listed
starts the lastwords gatherer for all its ranks (their files and the launcher's record were
remembered while they lived), and gputui.diagnose.gone.ended reads the record: words of a
death make the job stalled (exit 1) with the rank that died first and why, what ended the
others (their launcher, or the NCCL watchdog, with its timeout and whom they waited for);
ranks that all left without such words ended normally and are no alarm.

The call is held for HOLD_S so that every face sees it; a replay, which gathers nothing,
calls it from the recorded lastwords record alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gputui.collect.model import Job, Snapshot
from gputui.diagnose.verdict import STALLED, Verdict

HOLD_S = 60.0  # a vanished job's call stands this long (check prints it, the banner shows it)
WORDS_S = 30.0  # how long after the vanishing its last words are waited for
MAX_JOBS = 64  # jobs remembered between samples (a node runs a handful)


@dataclass(frozen=True)
class Member:
    """A rank as last seen: enough to name it and find its words once it is gone."""

    pid: int
    rank: int | None
    gpu: int | None
    create_time: float | None
    ppid: int | None
    parent: str | None


@dataclass
class _Gone:
    job: Job
    members: tuple[Member, ...]
    since: float  # the last sample that listed it
    verdict: Verdict
    called: Verdict | None = None


def _members(job: Job, snap: Snapshot) -> tuple[Member, ...]:
    procs = {p.pid: p for p in snap.processes}
    out = []
    for pid in job.pids:
        p = procs.get(pid)
        if p is None:
            continue
        out.append(
            Member(
                pid,
                p.rank.rank if p.rank is not None else None,
                p.gpus[0] if p.gpus else None,
                p.create_time,
                p.ppid,
                p.parent_cmd,
            )
        )
    return tuple(out)


def launcher(members: tuple[Member, ...]) -> str | None:
    """ "torchrun (pid 800)" when one process that is not a rank started every rank."""
    parents = {m.ppid for m in members}
    if len(parents) != 1 or None in parents or len(members) < 2:
        return None
    (ppid,) = parents
    if ppid in {m.pid for m in members} or ppid == 1:
        return None
    cmd = next((m.parent for m in members if m.parent), "") or ""
    name = "torchrun" if "torch.distributed.run" in cmd or "torchrun" in cmd else "its parent"
    return f"{name} (pid {ppid})"


def _first_verdict(gone: _Gone, t: float) -> Verdict:
    label = gone.job.label
    return Verdict(
        t=t,
        state=STALLED,
        vanished=tuple(sorted(m.gpu for m in gone.members if m.gpu is not None)),
        gone=tuple((m.pid, m.rank) for m in gone.members),
        suspect_pids=tuple(m.pid for m in gone.members),
        reason=f"{'job ' + label + ': ' if label else ''}every rank has exited",
        since=gone.since,
        job=label,
    )


class VanishWatch:
    """Per sample: a job no longer listed has its ranks' last words read, and is called when
    they tell of a death."""

    def __init__(
        self,
        gather: Callable[[Verdict, Job, tuple[Member, ...]], None] | None,
    ) -> None:
        self._gather = gather  # None: a replay gathers nothing (and looks nothing up here)
        self._last: dict[str, tuple[Job, tuple[Member, ...], float]] = {}
        self._gone: dict[str, _Gone] = {}

    def settled(self) -> bool:
        """Nothing here can change without words of a death: no gatherer to start (a
        replay) and no vanished job called. A vanished job not called waits for a lastwords
        record (the caller holds none: a replay's quiet step) or ends WORDS_S after it went,
        which a later poll() does as well as each poll() between."""
        return self._gather is None and all(g.called is None for g in self._gone.values())

    def seen_at(self, t: float) -> None:
        """A quiet sample at `t` (a replay's quiet step): the same jobs, the same members, seen
        again; only the time they were last listed moves, as poll() would move it."""
        self._last = {k: (job, members, t) for k, (job, members, _t) in self._last.items()}

    def poll(
        self,
        snap: Snapshot,
        newest: Callable[[str, Job, float], dict[str, Any] | None],
        explainers: dict[str, Any],
    ) -> Verdict | None:
        """The stalled verdict of a job that vanished with words of a death; None otherwise."""
        here = {job.key for job in snap.jobs}
        for key, (job, members, t) in self._last.items():
            if key in here or key in self._gone or not members:
                continue
            if self._live_ranks(members, snap):
                continue  # not listed, but its ranks live (NVML lost them for a sample)
            g = _Gone(job, members, t, Verdict(t=snap.t))
            g.verdict = _first_verdict(g, snap.t)
            self._gone[key] = g
            if self._gather is not None:
                self._gather(g.verdict, job, members)
        self._last = {
            job.key: (job, _members(job, snap), snap.t) for job in list(snap.jobs)[:MAX_JOBS]
        }
        found = None
        for key, g in list(self._gone.items()):
            if key in here:  # it came back (a restart under the same master): a new job
                del self._gone[key]
                continue
            if g.called is not None:
                if snap.t - g.called.t > HOLD_S:
                    del self._gone[key]
                elif found is None:
                    found = replace(g.called, t=snap.t)
                continue
            if snap.t - g.since > WORDS_S:
                del self._gone[key]  # no words of a death came: it ended
                continue
            v = self._judge(g, snap, newest, explainers)
            if v is not None:
                g.called = v
                found = found or v
        return found

    def _live_ranks(self, members: tuple[Member, ...], snap: Snapshot) -> bool:
        """A member still listed, or (live) still running on this host. A replay's pids
        are another host's or another time's: the recording alone says."""
        listed = {p.pid for p in snap.processes}
        if any(m.pid in listed for m in members):
            return True
        if self._gather is None:
            return False
        from gputui.collect.procs.rankio import alive

        return any(alive(m.pid, m.create_time) for m in members)

    def _judge(
        self,
        g: _Gone,
        snap: Snapshot,
        newest: Callable[[str, Job, float], dict[str, Any] | None],
        explainers: dict[str, Any],
    ) -> Verdict | None:
        from gputui.diagnose.gone.ended import job_ended

        rec = newest("lastwords", g.job, g.since - 5.0) if "lastwords" in explainers else None
        if rec is None:
            return None
        pids = {m.pid for m in g.members}
        try:
            ended = job_ended(rec, pids, launcher(g.members))
            ev = explainers["lastwords"](rec, g.verdict, snap)
        except Exception:  # noqa: S112 - an explainer's bug: no call, that is all
            return None
        if ended is None:
            return None
        lead = next((m for m in g.members if m.pid == ended.pid), None)
        evidence = {"lastwords": {**(getattr(ev, "extra", None) or {}), "ended": ended.extra}}
        return replace(
            g.verdict,
            t=snap.t,
            reason=ended.headline,
            suspects=(lead.gpu,) if lead is not None and lead.gpu is not None else (),
            suspect_pids=(lead.pid,) if lead is not None else g.verdict.suspect_pids,
            culprit_frame=ended.frame,
            findings=tuple(f.text for f in ended.findings),
            ranked=ended.findings,
            evidence=evidence,
        )
