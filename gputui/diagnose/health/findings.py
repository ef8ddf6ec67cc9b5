"""A stalled job's verdict, told by its GPUs' health: the sentences and the fold.

"rank 1 (GPU 1) hit Xid 79: GPU fell off the bus; drain the node" is worth more than any
stack: when a rank's GPU failed, or a rank took a program's Xid (31, 43), that leads the
verdict (Strength.HARDWARE, Strength.RANK_GONE), with the GPU, the rank, the Xid, what it
means and, for a program's fault, the rank's pid from the kernel log.

A link whose error rate stands out (gputui.diagnose.health.link_rates) is named beside the verdict
when its GPU is the hang's suspect (any of the job's GPUs when none is suspected) or the
slow job's straggler: "rank 3 (GPU 3) link 7: NVLink CRC errors at 4,100/min against the
node's 12/min", at CONTEXT strength: corrected errors slow a link, they do not stop a job,
so it never takes the headline (Xid 74 is where the driver calls a link failed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gputui.collect.nvml import xid as X
from gputui.diagnose.evidence import Evidence
from gputui.diagnose.ranking import Finding, Strength, rank, strongest

if TYPE_CHECKING:
    from gputui.diagnose.health.judge import HealthTracker

JOB_SLACK_S = 300.0  # an Xid without a pid counts from this long before the spinning began


def _ranks_of(
    v: Any, snap: Any, job: Any, seen: dict[int, Any] | None
) -> tuple[dict[int, int | None], dict[int, set[int]]]:
    """pid -> rank (live ranks and the ones gone), GPU -> pids of the job. `seen`: the last
    process seen on each GPU of the job (the Watcher's memory), which names a dead rank."""
    pid_rank: dict[int, int | None] = {}
    gpu_pids: dict[int, set[int]] = {}
    for g, p in (seen or {}).items():
        pid_rank[p.pid] = p.rank.rank if p.rank is not None else None
        gpu_pids.setdefault(g, set()).add(p.pid)
    pids = set(getattr(job, "pids", ()) or ()) | set(v.suspect_pids)
    for pid, r in v.gone:
        pid_rank[pid] = r
    for pid in pids:
        p = snap.process(pid) if snap is not None else None
        if p is not None:
            pid_rank.setdefault(pid, p.rank.rank if p.rank is not None else None)
            for g in p.gpus:
                gpu_pids.setdefault(g, set()).add(pid)
        else:
            pid_rank.setdefault(pid, None)
    return pid_rank, gpu_pids


def _who(rank: int | None, pid: int | None, gpu: int | None) -> str:
    """ "rank 1 (pid 599, GPU 1)", "pid 599 (GPU 1)", "GPU 1": whatever is known."""
    where = f"GPU {gpu}" if gpu is not None else ""
    if rank is not None:
        inside = ", ".join(s for s in (f"pid {pid}" if pid else "", where) if s)
        return f"rank {rank} ({inside})" if inside else f"rank {rank}"
    if pid:
        return f"pid {pid} ({where})" if where else f"pid {pid}"
    return where or "a GPU"


def job_findings(
    tracker: HealthTracker, v: Any, snap: Any, job: Any = None, seen: dict[int, Any] | None = None
) -> tuple[Finding, ...]:
    """The health findings about the job the verdict names (see HealthTracker.findings)."""
    gpus = set(v.spinning) | set(v.suspects) | set(v.vanished) | set(getattr(job, "gpus", ()) or ())
    pid_rank, gpu_pids = _ranks_of(v, snap, job, seen)
    now = getattr(snap, "t", v.t)
    since = v.since if v.since is not None else v.t
    out: list[Finding] = []

    def rank_on(gpu: int | None) -> tuple[int | None, int | None]:
        """The one rank on a GPU; (None, None) when ranks share it (NVML cannot tell)."""
        pids = sorted(gpu_pids.get(gpu, ())) if gpu is not None else []
        if len(pids) != 1:
            return None, None
        return pid_rank.get(pids[0]), pids[0]

    for ev in reversed(tracker.events):  # newest first: the latest fault leads
        i = X.info(ev.xid)
        if i.kind == X.INFO:
            continue
        mine = ev.pid is not None and ev.pid in pid_rank
        on_job_gpu = ev.gpu is not None and ev.gpu in gpus
        if not (mine or on_job_gpu):
            continue
        if i.kind == X.PROGRAM and not mine and ev.t < since - JOB_SLACK_S:
            continue  # an old fault of another program on this GPU
        if mine:
            rank, pid = pid_rank.get(ev.pid or 0), ev.pid
        elif ev.pid:  # a process the job does not know (another program, another namespace)
            rank, pid = None, ev.pid
        elif i.kind == X.PROGRAM and v.gone:  # NVML names the GPU only: a program's fault
            # ends its process, so the one rank that is gone took it (several: none named)
            rank, pid = (v.gone[0][1], v.gone[0][0]) if len(v.gone) == 1 else (None, None)
        else:  # NVML's event names the GPU only
            rank, pid = rank_on(ev.gpu)
        old = now - ev.t >= 120 or (tracker.started is not None and ev.t < tracker.started)
        age = f" ({tracker.age(ev, now)})" if old else ""
        action = i.action
        if ev.xid == 154 and (what := X.recovery_action(ev.text)):
            action = f"the driver asks: {what}"
        who = _who(rank, pid if i.kind == X.PROGRAM else ev.pid, ev.gpu)
        text = f"{who} hit Xid {ev.xid}: {i.meaning}; {action}{age}"
        if i.kind == X.HARDWARE:
            strength = Strength.HARDWARE  # the GPU under the job failed, whoever ran on it
        elif mine or not ev.pid:
            strength = Strength.RANK_GONE  # a rank's own fault (or NVML's, naming no pid)
        else:  # the kernel names another program's pid: said, never the job's headline
            strength = Strength.CONTEXT
        out.append(
            Finding(
                text,
                strength,
                "health",
                ranks=(rank,) if rank is not None else (),
                gpus=(ev.gpu,) if ev.gpu is not None else (),
                pids=(pid,) if pid else (),
            )
        )
    for gpu in sorted(gpus):
        h = tracker.word(gpu)
        if h.word == X.OK or any(f.gpus == (gpu,) and f.strength == Strength.HARDWARE for f in out):
            continue
        rank, pid = rank_on(gpu)
        verb = "is lost" if gpu in tracker.lost else f"is {h.word}"
        act = "drain the node" if h.word == X.FAILED else "reset the GPU at the next chance"
        out.append(
            Finding(
                f"{_who(rank, None, gpu)}: the GPU {verb}: {h.reason}; {act}",
                Strength.HARDWARE,
                "health",
                ranks=(rank,) if rank is not None else (),
                gpus=(gpu,),
                pids=(pid,) if pid else (),
            )
        )
    out += link_findings(tracker, set(v.suspects) or gpus, rank_on)
    return tuple(out)


def link_findings(
    tracker: HealthTracker,
    gpus: Iterable[int],
    rank_on: Callable[[int | None], tuple[int | None, int | None]] | None = None,
) -> list[Finding]:
    """CONTEXT findings for the links of `gpus` whose error rate stands out, naming the one
    rank on the GPU where `rank_on` knows it: "rank 3 (GPU 3) link 7: NVLink CRC errors at
    4,100/min against the node's 12/min"."""
    want = set(gpus)
    out = []
    for f in tracker.links.findings():
        if f.gpu not in want:
            continue
        r, _pid = rank_on(f.gpu) if rank_on is not None else (None, None)
        where = _who(r, None, f.gpu) + (f" link {f.link}" if f.link is not None else "")
        # No pid: health evidence's pids become suspects, and a link is not a suspect's mark.
        out.append(
            Finding(
                f"{where}: {f.words()}",
                Strength.CONTEXT,
                "health",
                ranks=(r,) if r is not None else (),
                gpus=(f.gpu,),
            )
        )
    return out


def with_links(v: Any, tracker: HealthTracker, snap: Any) -> Any:
    """A slow verdict with its stragglers' links that stand out named beside its reason (the
    reason stays the headline). For the Watcher (or the straggler rule) to call on a slow
    verdict; the verdict itself when there is nothing to name.

    Args:
        v: a slow verdict.
        tracker: the run's HealthTracker.
        snap: the latest sample.

    Returns:
        The verdict with its stragglers' links named, or `v` itself.
    """
    if not getattr(v, "stragglers", ()) or not tracker.links.findings():
        return v

    def rank_on(gpu: int | None) -> tuple[int | None, int | None]:
        procs = [p for p in getattr(snap, "processes", ()) if gpu in p.gpus]
        if len(procs) != 1:
            return None, None
        p = procs[0]
        return (p.rank.rank if p.rank is not None else None), p.pid

    found = [f for f in link_findings(tracker, v.stragglers, rank_on) if f.text not in v.findings]
    if not found:
        return v
    ranked = v.ranked or ((Finding(v.reason, Strength.NVML, "nvml"),) if v.reason else ())
    return replace(
        v,
        findings=(*v.findings, *(f.text for f in found)),
        ranked=rank([*ranked, *found]),
    )


def health_evidence(
    tracker: HealthTracker, v: Any, snap: Any, job: Any = None, seen: dict[int, Any] | None = None
) -> Evidence | None:
    """The health evidence for the Watcher's fold, None when health says nothing of the job.

    Args:
        tracker: the run's HealthTracker.
        v: the job's verdict.
        snap: the latest sample.
        job: the job the verdict names; None: found from the verdict.
        seen: the last process seen on each GPU of the job (names a dead rank); None: none.

    Returns:
        Evidence of kind `health`, or None when health says nothing of the job.
    """
    found = job_findings(tracker, v, snap, job, seen)
    if not found:
        return None
    pids = tuple(p for f in found for p in f.pids)
    return Evidence("health", ranked=found, suspect_pids=pids)


def with_health_headline(v: Any) -> Any:
    """The verdict with its headline (`reason`) taken from a health finding that leads the
    ranking (HARDWARE, RANK_GONE); the detector's own sentence is kept, last, as a finding.

    Args:
        v: a verdict with its findings ranked.

    Returns:
        The verdict with the health finding's headline, or `v` itself when none leads.
    """
    top = strongest(v.ranked)
    if top is None or top.source != "health" or top.lead == v.reason:
        return v
    findings = v.findings if v.reason in v.findings or not v.reason else (*v.findings, v.reason)
    return replace(v, reason=top.lead, findings=tuple(findings))
