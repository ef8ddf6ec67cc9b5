"""The hang detector over a window of history, per job, across nodes.

Each GPU's step is classified by the live rule (classify_all, job-wide) and its spinning
followed by the live fold (runs.advance_run), with the gaps scaled to the step: a scrape every 15 s
cannot show a dip of 1.5 s, so a dip (a missed scrape, or idle once the alarm is up) of up
to 1.5 steps is bridged, and spinning samples more than 2.5 steps apart do not make one run.
A job is stalled at the first step where one of its GPUs has spun for --stall-after, hung
after --hang-after; the onset said is that run's first spinning sample. Its suspects are
the GPUs of the job that do not spin then: idle (a rank stuck on its CPU side), busy
elsewhere, gone from the scrape, or left by its pod. A job that never stalls is healthy and
is never blamed.

One pass over the columns: O(GPUs x steps), no Snapshot per sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputui.collect.model import GpuSample
from gputui.collect.prom.columns import GpuColumns, History
from gputui.collect.prom.timespec import iso
from gputui.diagnose.exitcodes import HANG, OK
from gputui.diagnose.hang.classify import GpuState, classify_all, describe_state
from gputui.diagnose.hang.detector import MAX_GAP_S
from gputui.diagnose.hang.runs import DIP_MAX_S, SpinRun, advance_run
from gputui.diagnose.history.jobs import one_job_per_node, owner_jobs
from gputui.diagnose.history.samples import GpuReader
from gputui.diagnose.history.slow import Waits
from gputui.diagnose.states import is_alarm, label, worse
from gputui.diagnose.verdict import HUNG, STALLED
from gputui.diagnose.verdict import OK as OK_STATE

MAX_NAMED = 8  # suspects named in a line; the JSON names them all


@dataclass(frozen=True)
class Event:
    """Something that happened at sample time `t`: a verdict change, an Xid, a node that left
    the scrape. `text` is its line without the time; `data` its JSON fields."""

    t: float
    kind: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    code: int = OK


@dataclass
class JobReport:
    """One job over the window."""

    key: str
    gpus: list[str]
    nodes: list[str]
    worst: str = OK_STATE
    onset: float | None = None  # the first spinning sample of its first stall
    suspects: list[dict[str, Any]] = field(default_factory=list)  # at its first stall
    stragglers: list[str] = field(default_factory=list)
    slow_text: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.key,
            "state": self.worst,
            "gpus": len(self.gpus),
            "nodes": self.nodes,
            "onset": self.onset,
            "onset_time": iso(self.onset) if self.onset is not None else None,
            "suspects": self.suspects,
            "stragglers": self.stragglers,
        }


def gpu_ref(g: GpuColumns, hist: History, k: int | None) -> dict[str, Any]:
    """A GPU as JSON names it: node, index, UUID, and its pod at step k (or its last).

    Args:
        g: one GPU's columns.
        hist: the window's columns.
        k: the step whose pod is named; None: the GPU's last pod.

    Returns:
        `{"node", "gpu", "uuid", "pod"...}`.
    """
    ref: dict[str, Any] = {"host": g.host, "gpu": g.gpu, "uuid": g.uuid}
    o = owner_at(g, k)
    if o >= 0:
        own = hist.owners[o]
        ref.update(pod=own.pod, namespace=own.namespace, container=own.container)
    return ref


def sample_time(g: GpuColumns, hist: History, k: int) -> float:
    """When the value a GPU's step k reads was scraped (the step's time if not known).

    Args:
        g: one GPU's columns.
        hist: the window's columns.
        k: the step.

    Returns:
        Unix seconds.
    """
    seen = g.cols.get("seen")
    if seen is not None and seen[k] == seen[k]:
        return seen[k]
    return hist.time(k)


def owner_at(g: GpuColumns, k: int | None) -> int:
    """The owner at step k, else the last one before it (a GPU whose pod is gone)."""
    if k is None:
        k = g.n - 1
    for i in range(k, -1, -1):
        if g.owner[i] >= 0:
            return g.owner[i]
    return -1


def gpu_words(g: GpuColumns, hist: History, k: int | None) -> str:
    o = owner_at(g, k)
    own = f" ({hist.owners[o].short()})" if o >= 0 else ""
    return f"{g.host} GPU {g.gpu}{own}"


class _Job:
    """A job's members and the fold over its steps."""

    def __init__(self, key: str, members: list[int]) -> None:
        self.key = key
        self.members = members
        self.runs: dict[int, SpinRun] = {}
        self.last_in: dict[int, int] = {}  # member -> last step it was in the job, present
        self.state = OK_STATE
        self.said: tuple[Any, ...] = (OK_STATE,)
        self.by_owner = True  # jobs from pod labels (False: one job per node)
        self.waits = Waits()  # stragglers, counted until the first stall
        self.alarmed = False


def judge_hangs(
    hist: History,
    stall_after: float,
    hang_after: float,
    by_label: bool,
    readers: list[GpuReader],
) -> tuple[list[Event], list[JobReport]]:
    """Every job's verdict changes over the window, and a report per job."""
    step = hist.step
    dip = max(DIP_MAX_S, 1.5 * step)
    gap = max(MAX_GAP_S, 2.5 * step)
    by_owner = not one_job_per_node(hist, by_label)
    ojobs = owner_jobs(hist, by_label)
    jobs: dict[str, _Job] = {}
    for i, g in enumerate(hist.gpus):
        keys = {ojobs[o] for o in g.owner if o >= 0} if by_owner else {f"node {g.host}"}
        for key in keys:
            if key is not None:
                jobs.setdefault(key, _Job(key, [])).members.append(i)
    for j in jobs.values():
        j.by_owner = by_owner
    events: list[Event] = []
    reports = {
        key: JobReport(
            key,
            [hist.gpus[i].key for i in j.members],
            sorted({hist.gpus[i].host for i in j.members}),
        )
        for key, j in jobs.items()
    }
    for k in range(hist.n):
        t = hist.time(k)
        for job in jobs.values():
            ev = _step(job, k, t, hist, readers, ojobs, by_owner, stall_after, hang_after, dip, gap)
            if ev is not None:
                events.append(ev)
                _note(reports[job.key], ev)
    for key, job in jobs.items():
        rep = reports[key]
        names = {i: hist.gpus[i].key for i in job.members}
        rep.stragglers, said = job.waits.judge(job.members, names)
        if said is not None:
            rep.slow_text = f"SLOW     job {key}: {said}"
    return events, sorted(reports.values(), key=lambda r: r.key)


def _note(rep: JobReport, ev: Event) -> None:
    state = ev.data["state"]
    rep.worst = worse(rep.worst, state)
    if rep.onset is None and is_alarm(state):
        rep.onset = ev.data["since"]
        rep.suspects = ev.data["suspects"]


def _step(
    job: _Job,
    k: int,
    t: float,
    hist: History,
    readers: list[GpuReader],
    ojobs: list[str | None],
    by_owner: bool,
    stall_after: float,
    hang_after: float,
    dip: float,
    gap: float,
) -> Event | None:
    states: dict[int, GpuState | str] = {}
    runs = job.runs
    now: dict[int, float] = {}  # each member's sample time at this step
    samples: dict[int, GpuSample] = {}
    owned: dict[int, bool] = {}
    for i in job.members:
        r = readers[i]
        # A job's GPU at this step: its pod's (by labels), or, per node, one in use (a GPU
        # nobody uses is free, not a suspect, as live; one whose process left it is).
        o = r.owner[k]
        mine = (o >= 0 and ojobs[o] == job.key) if by_owner else r.in_use(k)
        if mine and r.present(k):
            samples[i] = r.sample(k)
        owned[i] = mine
    # Classified job-wide, as live node-wide (classify_node): a quiet wait in a small
    # collective spins only while no GPU of the job computes.
    order = list(samples)
    classes = dict(zip(order, classify_all([samples[i] for i in order]), strict=True))
    for i in job.members:
        r = readers[i]
        mine = owned[i]
        if i in samples:
            st = classes[i]
            job.last_in[i] = k
            now[i] = t_i = r.when(k, t)
        elif i not in job.last_in:
            continue  # not (yet) of this job
        else:
            st = GpuState.UNKNOWN if not r.present(k) else GpuState.FREE
            t_i = t
        states[i] = st if mine or st is not GpuState.FREE else "left"
        run = runs.get(i)
        if run is None and st is not GpuState.SPINNING:
            continue
        run = advance_run(run, t_i, st, stall_after=stall_after, dip_max=dip, max_gap=gap)
        if run is None:
            runs.pop(i, None)
        else:
            runs[i] = run
    if not job.alarmed and len(samples) > 1:
        job.waits.observe(samples)
    spinning = [i for i, run in runs.items() if i in now and run.last_spin == now[i]]
    since = min((runs[i].since for i in spinning), default=t)
    t = max((now[i] for i in spinning), default=t)  # the latest sample the verdict reads
    if not spinning or t - since < stall_after:
        if job.state == OK_STATE:
            return None
        job.state, job.said = OK_STATE, (OK_STATE,)
        return Event(
            t,
            "verdict",
            f"OK       job {job.key}: no GPU spins any more (the alarm clears)",
            {"job": job.key, "state": OK_STATE, "since": None, "spinning": [], "suspects": []},
        )
    state = HUNG if t - since >= hang_after else STALLED
    spinning.sort()
    keep = since - hang_after
    suspects = [i for i in states if i not in spinning and hist.time(job.last_in[i]) >= keep]
    said = (state, tuple(spinning), tuple(suspects))
    if said == job.said:
        return None
    job.state, job.said, job.alarmed = state, said, True
    return _verdict_event(job, k, t, since, state, spinning, suspects, states, hist)


def _spinners(spinning: list[int], gpus: list[GpuColumns]) -> str:
    """`gpu-3 GPUs 0, 1, 2` for a few; `63 GPUs on gpu-000, gpu-001, ...` for many."""
    by_host: dict[str, list[str]] = {}
    for i in spinning:
        by_host.setdefault(gpus[i].host, []).append(gpus[i].gpu)
    if len(spinning) <= MAX_NAMED:
        return "; ".join(
            f"{h} GPU{'s' if len(ix) > 1 else ''} {', '.join(ix)}" for h, ix in by_host.items()
        )
    nodes = list(by_host)
    more = " ..." if len(nodes) > 4 else ""
    return f"{len(spinning)} GPUs on {', '.join(nodes[:4])}{more}"


def _word(st: GpuState | str | None) -> str:
    if st is None or st is GpuState.UNKNOWN:
        return "missing"
    return str(st)


def _verdict_event(
    job: _Job,
    k: int,
    t: float,
    since: float,
    state: str,
    spinning: list[int],
    suspects: list[int],
    states: dict[int, GpuState | str],
    hist: History,
) -> Event:
    gpus = hist.gpus
    # GPUs of one node and pod in the same state are said together:
    # "node-6 GPUs 0, 1, 2, 3 (pod ml/b-1) no samples since ..."
    said: dict[tuple[str, str, str], list[str]] = {}
    refs = []
    for i in suspects:
        g = gpus[i]
        w = _word(states.get(i))
        last = job.last_in.get(i)
        if w == "missing":
            when = f" since {iso(sample_time(g, hist, last))}" if last is not None else ""
            what = f"no samples{when} (missing from the scrape)"
        elif w == "left":
            what = "its pod left the GPU" if job.by_owner else "its process left the GPU"
        else:
            what = describe_state(states[i])  # type: ignore[arg-type]
        o = owner_at(g, k)
        own = f" ({hist.owners[o].short()})" if o >= 0 else ""
        said.setdefault((g.host, own, what), []).append(g.gpu)
        refs.append({**gpu_ref(g, hist, k), "state": w})
    words = [
        f"{host} GPU{'s' if len(ix) > 1 else ''} {', '.join(ix)}{own} {what}"
        for (host, own, what), ix in said.items()
    ]
    spin = (
        f"{_spinners(spinning, gpus)} {'has' if len(spinning) == 1 else 'have'} been "
        "spinning in a collective "
        f"(util ~100%, no memory traffic) since {iso(since)}, {t - since:.0f} s"
    )
    if words:
        more = f" and {len(words) - MAX_NAMED} more" if len(words) > MAX_NAMED else ""
        tail = "; not spinning: " + ", ".join(words[:MAX_NAMED]) + more
    else:
        tail = (
            "; every GPU of the job spins, so no single suspect can be named from its GPUs: "
            "the peer they wait for is outside this selection, or the ranks entered "
            "different collectives"
        )
    head = f"{label(state):<8}"
    text = f"{head} job {job.key}: {spin}{tail}."
    data = {
        "job": job.key,
        "state": state,
        "since": since,
        "since_time": iso(since),
        "spinning": [gpu_ref(gpus[i], hist, k) for i in spinning],
        "suspects": refs,
    }
    return Event(t, "verdict", text, data, HANG)
