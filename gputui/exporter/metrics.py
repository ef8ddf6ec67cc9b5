"""The prometheus_client Collector: metric families built from the latest View at each scrape.

A custom Collector rather than Gauges updated by the sampler: a Gauge keeps every label set
it was ever given, so the series of a finished job would stay until someone removed them;
families built from the latest View hold exactly what is on the node now.

Series per GPU: 5 readings (each only when available) + 6 one-hot states + spin seconds +
processes = 13. Per job: 4 one-hot states (ok, busy, stalled, hung) + stall seconds = 5,
plus one suspect series per suspect GPU (per pid on it) while the job is stalled or hung. A
slow job (a straggler): gputui_rank_wait_ratio per GPU of a job with 8 s of history, and one
gputui_job_straggler series per straggler GPU (per pid on it). Per exporter: sample age and
build info (2), and prometheus_client's standard process_* series for the exporter itself.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from gputui import __version__
from gputui.diagnose.hang.classify import GpuState
from gputui.exporter.health_metrics import health_families
from gputui.exporter.view import JOB_STATES, View, Watch

GPU_LABELS = ["gpu", "uuid", "host"]
GPU_STATES = tuple(s.value for s in GpuState)

# name (without the gputui_gpu_ prefix), help, GpuRow attribute
_READINGS = (
    ("utilization_ratio", "Fraction of time a kernel ran (NVML utilization.gpu / 100)", "util"),
    (
        "memory_utilization_ratio",
        "Fraction of time device memory was read or written (NVML utilization.memory / 100)",
        "mem_util",
    ),
    ("power_watts", "Board power draw (NVML, averaged)", "power_w"),
    ("power_limit_watts", "Enforced power limit", "power_limit_w"),
    ("memory_used_bytes", "Device memory in use", "mem_used_bytes"),
)


class GputuiCollector(Collector):
    """Formats the Watch's latest View. Never samples, never runs the detector."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch

    def describe(self) -> list[Metric]:
        # Registering must not call collect(): that would export before the first sample.
        return []

    def collect(self) -> Iterator[Metric]:
        view, age = self.watch.current()
        fam = GaugeMetricFamily(
            "gputui_sample_age_seconds",
            "Seconds since the sampler delivered its latest snapshot (since start, before the "
            "first); it grows while NVML does not answer",
            labels=["host"],
        )
        fam.add_metric([view.host if view is not None else self.watch.host], age)
        yield fam
        yield InfoMetricFamily("gputui_build", "gputui version", value={"version": __version__})
        if view is not None:
            yield from _gpu_families(view)
            yield from _job_families(view)
            yield from health_families(view.health, view.host)


def _gpu_families(view: View) -> Iterator[Metric]:
    host = view.host
    for name, text, attr in _READINGS:
        fam = GaugeMetricFamily(f"gputui_gpu_{name}", text, labels=GPU_LABELS)
        for g in view.gpus:
            value = getattr(g, attr)
            if value is not None:  # N/A is left out, never exported as 0
                fam.add_metric([str(g.index), g.uuid, host], value)
        yield fam
    state = GaugeMetricFamily(
        "gputui_gpu_state",
        "The hang detector's class of the GPU at the latest sample, one-hot "
        "(spinning = util ~100%, no memory traffic, idle power: a kernel waiting in a collective)",
        labels=[*GPU_LABELS, "state"],
    )
    spin = GaugeMetricFamily(
        "gputui_gpu_spin_seconds",
        "Length of the GPU's current run of spinning, 0 when it does not spin",
        labels=GPU_LABELS,
    )
    procs = GaugeMetricFamily(
        "gputui_gpu_processes",
        "Compute processes NVML lists on the GPU",
        labels=GPU_LABELS,
    )
    owner = GaugeMetricFamily(
        "gputui_gpu_owner",
        "1 for each pod, container or Slurm job with a process on the GPU (labels like "
        "dcgm-exporter's pod, namespace, container; empty where unknown)",
        labels=[*GPU_LABELS, "pod", "namespace", "container", "slurm_job"],
    )
    wait = GaugeMetricFamily(
        "gputui_rank_wait_ratio",
        "Fraction of the GPU's busy samples, over the last 8-30 s, in the collective-wait "
        "pattern (util ~100%, little memory traffic, low power): how much of each step its "
        "rank waits for a peer. Absent until its job has enough history",
        labels=GPU_LABELS,
    )
    for g in view.gpus:
        labels = [str(g.index), g.uuid, host]
        for row in g.owners:
            owner.add_metric([*labels, *row], 1.0)
        if g.wait_ratio is not None:
            wait.add_metric(labels, g.wait_ratio)
        for s in GPU_STATES:
            state.add_metric([*labels, s], 1.0 if g.state == s else 0.0)
        spin.add_metric(labels, g.spin_s)
        if g.processes is not None:
            procs.add_metric(labels, g.processes)
    yield from (state, spin, procs, owner, wait)


def _job_families(view: View) -> Iterator[Metric]:
    host = view.host
    state = GaugeMetricFamily(
        "gputui_job_state",
        "The hang detector's state of each job on this node, one-hot (ok, busy, stalled, "
        "hung); busy: its peers wait while the rank they wait for moves bytes (a checkpoint)",
        labels=["job", "host", "state"],
    )
    stall = GaugeMetricFamily(
        "gputui_job_stall_seconds",
        "Seconds the job's GPUs have been spinning while it is stalled or hung; 0 when ok",
        labels=["job", "host"],
    )
    suspect = GaugeMetricFamily(
        "gputui_job_suspect",
        "1 for each GPU of a stalled or hung job that does not spin: the likely culprit "
        "(rank and pid as last seen on it; empty when unknown)",
        labels=["job", "gpu", "rank", "pid", "host"],
    )
    mismatch = GaugeMetricFamily(
        "gputui_job_mismatch",
        "1 while NCCL RAS says the job's ranks entered different collectives (a "
        "collective-type mismatch: the ranks took different code paths), else 0",
        labels=["job", "host"],
    )
    debug = GaugeMetricFamily(
        "gputui_job_debug_server",
        "While a job is stalled or hung: 1 when its PyTorch debug server (every rank's stack "
        "and flight recorder) answers, 0 when none does",
        labels=["job", "host"],
    )
    for j in view.jobs:
        mismatch.add_metric([j.job, host], 1.0 if j.mismatch else 0.0)
        if j.debug_server is not None:
            debug.add_metric([j.job, host], 1.0 if j.debug_server else 0.0)
        for s in JOB_STATES:
            state.add_metric([j.job, host, s], 1.0 if j.state == s else 0.0)
        stall.add_metric([j.job, host], j.stall_s)
        for x in j.suspects:
            rank = "" if x.rank is None else str(x.rank)
            pid = "" if x.pid is None else str(x.pid)
            suspect.add_metric([j.job, str(x.gpu), rank, pid, host], 1.0)
    straggler = GaugeMetricFamily(
        "gputui_job_straggler",
        "1 for each GPU of a slow job that its peers wait for (a straggler: the job "
        "progresses, slowly); rank and pid as seen on it, empty when unknown",
        labels=["job", "gpu", "rank", "pid", "host"],
    )
    for slow in view.stragglers:
        rank = "" if slow.rank is None else str(slow.rank)
        pid = "" if slow.pid is None else str(slow.pid)
        straggler.add_metric([slow.job, str(slow.gpu), rank, pid, host], 1.0)
    yield from (state, stall, suspect, straggler, mismatch)
    if debug.samples:
        yield debug


def exported_names() -> tuple[str, ...]:
    """Every metric name this collector emits for every recording (the dashboard and rules
    tests use it); the GPU health series, served once health was read, are
    gputui.exporter.health_metrics.NAMES."""
    gpu = [f"gputui_gpu_{n}" for n, _, _ in _READINGS]
    gpu += ["gputui_gpu_state", "gputui_gpu_spin_seconds", "gputui_gpu_processes"]
    gpu += ["gputui_gpu_owner", "gputui_rank_wait_ratio"]
    job = ["gputui_job_state", "gputui_job_stall_seconds", "gputui_job_suspect"]
    job += ["gputui_job_straggler"]
    job.append("gputui_job_mismatch")
    return (*gpu, *job, "gputui_sample_age_seconds", "gputui_build_info")
