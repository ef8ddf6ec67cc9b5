"""The prometheus_client Collector: metric families built from the latest View at each scrape.

A custom Collector rather than Gauges updated by the sampler: a Gauge keeps every label set
it was ever given, so the series of a finished job would stay until someone removed them;
families built from the latest View hold exactly what is on the node now.

Series per GPU: 5 readings (each only when available) + 6 one-hot states + spin seconds +
processes = 13. Per job: 3 one-hot states + stall seconds = 4, plus one suspect series per
suspect GPU (per pid on it) while the job is stalled or hung. Per exporter: sample age and
build info (2), and prometheus_client's standard process_* series for the exporter itself.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from gputui import __version__
from gputui.diagnose.classify import GpuState
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
    for g in view.gpus:
        labels = [str(g.index), g.uuid, host]
        for s in GPU_STATES:
            state.add_metric([*labels, s], 1.0 if g.state == s else 0.0)
        spin.add_metric(labels, g.spin_s)
        if g.processes is not None:
            procs.add_metric(labels, g.processes)
    yield from (state, spin, procs)


def _job_families(view: View) -> Iterator[Metric]:
    host = view.host
    state = GaugeMetricFamily(
        "gputui_job_state",
        "The hang detector's state of each job on this node, one-hot (ok, stalled, hung)",
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
    for j in view.jobs:
        mismatch.add_metric([j.job, host], 1.0 if j.mismatch else 0.0)
        for s in JOB_STATES:
            state.add_metric([j.job, host, s], 1.0 if j.state == s else 0.0)
        stall.add_metric([j.job, host], j.stall_s)
        for x in j.suspects:
            rank = "" if x.rank is None else str(x.rank)
            pid = "" if x.pid is None else str(x.pid)
            suspect.add_metric([j.job, str(x.gpu), rank, pid, host], 1.0)
    yield from (state, stall, suspect, mismatch)


def exported_names() -> tuple[str, ...]:
    """Every metric name this collector can emit (the dashboard and rules tests use it)."""
    gpu = [f"gputui_gpu_{n}" for n, _, _ in _READINGS]
    gpu += ["gputui_gpu_state", "gputui_gpu_spin_seconds", "gputui_gpu_processes"]
    job = ["gputui_job_state", "gputui_job_stall_seconds", "gputui_job_suspect"]
    job.append("gputui_job_mismatch")
    return (*gpu, *job, "gputui_sample_age_seconds", "gputui_build_info")
