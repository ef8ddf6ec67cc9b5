"""What the exporter serves, as plain immutable data built once per sample.

The sampler thread runs the detector on each snapshot and builds a `View` from the snapshot,
the verdict and the detector's per-GPU spin runs and per-job verdicts, read through the
public face of the detector's home (gputui.watch.judge.Judge), never its insides. A scrape
only formats the latest View, so scrapes cost no NVML call and no detector work, however
often they come.

Label values stay bounded: GPU series carry index, UUID and host; job series carry the job's
key (never its free-text label or a command line); pids appear only on suspect series. A
lone process's job key holds its pid (`pid:1234`), so it is exported as the GPUs it holds
(`process:gpu0+1`): a crash-looping inference server then does not mint new series on every
restart. The View is rebuilt from the latest snapshot alone, so the series of a job that has
gone disappear with it and the number of series follows what is on the node now.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gputui.collect.model import Snapshot
from gputui.diagnose.hang.detector import Detector
from gputui.diagnose.job_groups import Group
from gputui.diagnose.states import EXPORTED, worse
from gputui.diagnose.verdict import BUSY, OK, Verdict
from gputui.watch.judge import Judge

MIB = 2**20
# Longest label value; a longer job key (a TORCHELASTIC_RUN_ID can be anything) is cut and
# given a digest of the whole key, so two long keys stay apart.
MAX_LABEL = 120
JOB_STATES = EXPORTED  # gputui_job_state's one-hot values, from the one table of states
MAX_OWNERS_PER_GPU = 16  # label sets per GPU on gputui_gpu_owner: bounded like every label


@dataclass(frozen=True)
class GpuRow:
    """One GPU's exported readings; None where the reading is not available (not exported)."""

    index: int
    uuid: str
    state: str  # one of gputui.diagnose.hang.classify.GpuState's values
    spin_s: float  # length of its current run of spinning, 0 when it does not spin
    util: float | None = None  # ratio 0..1
    mem_util: float | None = None  # ratio 0..1
    power_w: float | None = None
    power_limit_w: float | None = None
    mem_used_bytes: float | None = None
    processes: int | None = None  # compute processes NVML lists on it
    # (pod, namespace, container id, Slurm job) of each distinct owner of its processes, as
    # dcgm-exporter labels GPUs with the pods that use them; "" where not known.
    owners: tuple[tuple[str, str, str, str], ...] = ()
    # Fraction of its busy samples in the collective-wait pattern over the detector's
    # window (gputui.diagnose.slow.straggler); None until its job has enough history.
    wait_ratio: float | None = None


@dataclass(frozen=True)
class Suspect:
    """A suspect GPU of a stalled job, with the rank and pid last seen on it where known."""

    gpu: int
    rank: int | None
    pid: int | None


@dataclass(frozen=True)
class Straggler:
    """A GPU that holds a slow job back (its peers wait for it), with its rank and pid."""

    job: str
    gpu: int
    rank: int | None
    pid: int | None


@dataclass(frozen=True)
class JobRow:
    job: str  # the bounded label value (see `job_label`)
    state: str  # one of JOB_STATES
    stall_s: float  # seconds its GPUs have spun, while stalled or hung; 0 when ok or busy
    suspects: tuple[Suspect, ...] = ()
    mismatch: bool = False  # NCCL RAS: its ranks entered different collectives
    debug_server: bool | None = None  # its PyTorch debug server answered (asked while stalled)


@dataclass(frozen=True)
class View:
    """Everything one scrape exports, from one snapshot."""

    t: float  # the snapshot's sample time
    host: str
    gpus: tuple[GpuRow, ...]
    jobs: tuple[JobRow, ...]
    health: tuple[Any, ...] = ()  # gputui.exporter.health_metrics.HealthRow per GPU
    stragglers: tuple[Straggler, ...] = ()


def bounded(value: str, limit: int = MAX_LABEL) -> str:
    """A label value of at most `limit` characters that still tells long values apart."""
    if len(value) <= limit:
        return value
    digest = hashlib.sha1(value.encode(), usedforsecurity=False).hexdigest()[:10]
    return f"{value[: limit - 11]}~{digest}"


def job_label(key: str, gpus: Iterable[int]) -> str:
    """The `job` label of a detector group: its key, except a lone process's (see above)."""
    if key.startswith("pid:"):
        return "process:gpu" + "+".join(str(i) for i in sorted(gpus))
    return bounded(key)


def _ratio(percent: float | None) -> float | None:
    return None if percent is None else percent / 100.0


def _owners(snap: Snapshot, gpu: int) -> tuple[tuple[str, str, str, str], ...]:
    out: list[tuple[str, str, str, str]] = []
    for p in snap.processes:
        o = p.owner
        if o is None or gpu not in p.gpus:
            continue
        pod = o.pod_name or o.pod_uid or ""
        row = (
            bounded(pod, 63),
            bounded(o.namespace or "", 63),
            bounded(o.container or (o.container_id or "")[:12], 63),
            o.slurm_job or "",
        )
        if row not in out:
            out.append(row)
    return tuple(out[:MAX_OWNERS_PER_GPU])


def gpu_rows(snap: Snapshot, verdict: Verdict, judge: Judge) -> tuple[GpuRow, ...]:
    rows = []
    waits = {i: x for s in judge.straggles for i, x in s.shares.items()}
    for g in snap.gpus:
        run = judge.runs.get(g.index)
        rows.append(
            GpuRow(
                index=g.index,
                uuid=bounded(g.uuid or ""),
                state=verdict.gpu_states.get(g.index, "unknown"),
                spin_s=run.length(snap.t) if run is not None else 0.0,
                util=_ratio(g.util),
                mem_util=_ratio(g.mem_util),
                power_w=g.power_w,
                power_limit_w=g.power_limit_w,
                mem_used_bytes=None if g.mem_used_mb is None else g.mem_used_mb * MIB,
                processes=None if "pids" in g.na else len(g.pids),
                owners=_owners(snap, g.index),
                wait_ratio=waits.get(g.index),
            )
        )
    return tuple(rows)


def _suspects(v: Verdict, group: Group, ranks: Mapping[int, int]) -> list[Suspect]:
    out = []
    for i in v.suspects:
        member = group.members.get(i)
        pids = member.pids if member is not None else ()
        out += [Suspect(i, ranks.get(p), p) for p in pids] or [Suspect(i, None, None)]
    gone = {pid for pid, _ in v.gone}  # ranks that exited beside a rank still on their GPU
    out += [Suspect(gpu, rank, p) for p, (_, rank, gpu) in group.departed.items() if p in gone]
    return out


def job_rows(
    groups: Mapping[str, Group],
    verdicts: Mapping[str, Verdict],
    ranks: Mapping[int, int],
    ras: Any = None,
    snap: Snapshot | None = None,
    busy: Any = None,
    debug: Any = None,
) -> tuple[JobRow, ...]:
    """One row per job the detector follows now. Two groups that map to one label (two lone
    processes on the same GPUs) are merged: the worse state, the longer stall, all suspects."""
    rows: dict[str, JobRow] = {}
    for key, group in groups.items():
        v = verdicts.get(key)
        label = job_label(key, group.members)
        state = v.state if v is not None else OK
        stall = v.t - v.since if v is not None and v.since is not None else 0.0
        suspects = _suspects(v, group, ranks) if v is not None else []
        mismatch = False
        if v is not None and busy is not None and busy.busy(key, v) is not None:
            # Its suspect moves bytes (a checkpoint): busy, no alarm, no suspect series.
            v, state, stall, suspects = None, BUSY, 0.0, []
        if v is not None and ras is not None:  # what NCCL RAS names, beyond NVML
            named = ras.named(key, snap)
            mismatch = named.mismatch
            for gpu, rank, pid in named.behind:
                x = Suspect(gpu if gpu is not None else -1, rank, pid)
                if gpu is not None and x not in suspects:
                    suspects.append(x)
        up = debug.up(key) if debug is not None else None
        old = rows.get(label)
        if old is not None:
            state = worse(state, old.state)
            stall = max(stall, old.stall_s)
            suspects = list(old.suspects) + [s for s in suspects if s not in old.suspects]
            mismatch = mismatch or old.mismatch
            up = old.debug_server if up is None else up or bool(old.debug_server)
        rows[label] = JobRow(label, state, stall, tuple(suspects), mismatch, up)
    return tuple(sorted(rows.values(), key=lambda r: r.job))


def straggler_rows(judge: Judge, ranks: Mapping[int, int]) -> tuple[Straggler, ...]:
    """One row per straggler GPU (per pid on it) of every slow job at the latest sample."""
    out = []
    for s in judge.straggles:
        label = job_label(s.key, s.shares)
        for i in s.stragglers:
            pids = s.pids.get(i, ())
            rank = s.ranks.get(i)
            out += [Straggler(label, i, ranks.get(p, rank), p) for p in pids]
            out += [] if pids else [Straggler(label, i, rank, None)]
    return tuple(out)


class Watch:
    """The sampler's consumer: runs the detector on each snapshot and publishes the View.

    `on_snapshot` runs in the sampler thread only; `current` may be called from any scrape
    thread and returns an immutable View, so no scrape ever waits on the detector.
    """

    def __init__(
        self,
        judge: Judge | Detector,
        host: str,
        clock: Callable[[], float] = time.monotonic,
        ras: Any = None,
        busy: Any = None,
        debug: Any = None,
    ) -> None:
        # The detector's home, read through its public face; a Detector a test made is
        # given one (gputui.watch.judge).
        self.judge = judge if isinstance(judge, Judge) else Judge.around(judge)
        self.ras = ras  # gputui.exporter.ras_suspects.RasSuspects, or None
        self.busy = busy  # gputui.exporter.busy.BusySuspects, or None (a replay)
        self.debug = debug  # gputui.exporter.debugserver_up.DebugServerUp, or None
        self.host = bounded(host)  # when a snapshot does not name its host (older recordings)
        self.clock = clock
        self.started = clock()
        self.samples = 0
        self._lock = threading.Lock()
        self._view: View | None = None
        self._received = self.started
        self._ranks: dict[int, int] = {}  # pid -> rank, for suspects whose process is gone
        from gputui.diagnose.health.judge import HealthTracker

        self.health = HealthTracker()  # Xids, ECC, remaps from the snapshots' records

    def on_snapshot(self, snap: Snapshot) -> None:
        from gputui.exporter.health_metrics import health_rows

        judge = self.judge
        verdict = judge.judge(snap)
        self.health.update(snap)
        groups = judge.groups
        self._remember_ranks(snap, groups)
        if self.ras is not None:
            self.ras.update(snap, judge)
        if self.busy is not None:
            self.busy.update(snap, judge)
        if self.debug is not None:
            self.debug.update(snap, judge)
        view = View(
            t=snap.t,
            host=bounded(snap.hostname or self.host),
            gpus=gpu_rows(snap, verdict, judge),
            jobs=job_rows(
                groups,
                judge.job_verdicts,
                self._ranks,
                self.ras,
                snap,
                busy=self.busy,
                debug=self.debug,
            ),
            health=health_rows(self.health, snap, bounded),
            stragglers=straggler_rows(judge, self._ranks),
        )
        with self._lock:
            self._view = view
            self._received = self.clock()
            self.samples += 1

    def _remember_ranks(self, snap: Snapshot, groups: Mapping[str, Group]) -> None:
        """Keep the rank of every pid the detector still remembers, and only those: a dead
        rank is still named with its rank, and the map never outgrows the jobs on the node."""
        for p in snap.processes:
            if p.rank is not None and p.rank.rank is not None:
                self._ranks[p.pid] = p.rank.rank
        keep = {pid for g in groups.values() for m in g.members.values() for pid in m.pids}
        for pid in [pid for pid in self._ranks if pid not in keep]:
            del self._ranks[pid]

    def current(self) -> tuple[View | None, float]:
        """The latest View (None before the first sample) and the seconds since it arrived
        (since the start, before the first): a wedged NVML shows as a growing age."""
        with self._lock:
            view, received = self._view, self._received
        return view, max(0.0, self.clock() - received)

    @property
    def detector(self) -> Detector:
        """The detector itself, for a test that reads its latest verdict (`.last`)."""
        return self.judge.detector

    @property
    def remembered_pids(self) -> int:
        return len(self._ranks)
