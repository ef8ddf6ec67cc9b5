"""GPU health for Prometheus: an Xid counter, ECC / row-remap / health gauges.

Why a counter of Xids since the exporter started, not a "last Xid" gauge: a sticky gauge
(dcgm-exporter's XID series) stays at its value after the fault, so an alert on it fires
for ever or needs the value cleared by hand. `gputui_gpu_xid_total` only goes up, by one per
fault seen since the exporter started, so `increase(...[10m]) > 0` is a fault in the last
ten minutes and nothing after. Its `kind` label (hardware, program, info) comes from the Xid
catalogue, so an alert can leave out the program's faults (31, 43) that do not make a GPU
sick. Kernel-log Xids from before the start are not counted (they are in `check`).

Readings that are not supported are left out, never exported as 0; a GPU whose health was
never read (a recording made before gputui read it) has no health series at all.

NVLink error rates (gputui.diagnose.health.link_rates), per minute:
`gputui_gpu_nvlink_error_rate_max` is each GPU's worst link per kind (crc, replay,
recovery): at most 3 series a GPU, where one per link would be 54 (432 on 8 GPUs), and a bad
link is what an alert wants, not a sum that 18 healthy links' noise hides it in.
`gputui_nvlink_error_rate` carries the link number, but only for the links the rule names
(usually none), so its cardinality stays that of the faults. Totals since boot are not
exported: healthy GPUs read thousands.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gputui.collect.nvml import xid as X

LABELS = ["gpu", "uuid", "host"]
WORDS = ("ok", "degraded", "failed")


@dataclass(frozen=True)
class HealthRow:
    """One GPU's health for a scrape; None where the reading is not available."""

    index: int
    uuid: str
    word: str
    ecc_volatile: int | None = None
    ecc_aggregate: int | None = None
    remap_corr: int | None = None
    remap_uncorr: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    pcie_replay: int | None = None
    xids: tuple[tuple[int, str, int], ...] = ()  # (xid, kind, faults since start)
    nvlink_max: tuple[tuple[str, float], ...] = ()  # (kind, worst link's errors a minute)
    nvlink_named: tuple[tuple[int, str, float], ...] = ()  # (link, kind, a minute): named
    pcie_replay_rate: float | None = None  # a minute


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _bool(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def health_rows(tracker: Any, snap: Any, uuid: Any = str) -> tuple[HealthRow, ...]:
    """A row per GPU of the snapshot from what the tracker knows (after `update(snap)`)."""
    words = tracker.words(snap.gpus)
    known = set(tracker.counters) | set(tracker.lost) | {g for g, _ in tracker.counts}
    known |= set(tracker.links.reads)
    rows = []
    for g in snap.gpus:
        if g.index not in known:
            continue  # nothing read of its health (an older recording): no claim of "ok"
        c = tracker.counters.get(g.index, {})
        xids = tuple(
            (x, X.info(x).kind, n)
            for (gpu, x), n in sorted(tracker.counts.items(), key=str)
            if gpu == g.index
        )
        h = words.get(g.index)
        links = tracker.links
        pcie = links.pcie_rate.get(g.index)
        named = tuple(
            (f.link, f.kind, f.per_min)
            for f in links.findings()
            if f.gpu == g.index and f.link is not None
        )
        rows.append(
            HealthRow(
                index=g.index,
                uuid=uuid(g.uuid or ""),
                word=h.word if h is not None else "ok",
                ecc_volatile=_int(c.get("ecc_uncorrected_volatile")),
                ecc_aggregate=_int(c.get("ecc_uncorrected_aggregate")),
                remap_corr=_int(c.get("remap_corr")),
                remap_uncorr=_int(c.get("remap_uncorr")),
                remap_pending=_bool(c.get("remap_pending")),
                remap_failure=_bool(c.get("remap_failure")),
                pcie_replay=_int(c.get("pcie_replay")),
                xids=xids,
                nvlink_max=tuple(sorted(links.max_rates(g.index).items())),
                nvlink_named=named,
                pcie_replay_rate=pcie[0] if pcie is not None else None,
            )
        )
    return tuple(rows)


def health_families(rows: tuple[HealthRow, ...], host: str) -> Iterator[Metric]:
    health = GaugeMetricFamily(
        "gputui_gpu_health",
        "The GPU's health word, one-hot: failed (lost, a hardware Xid such as 79 or 48, a "
        "failed row remap), degraded (uncorrected ECC errors, a pending row remap, Xid 63/92/"
        "94), ok",
        labels=[*LABELS, "health"],
    )
    xid = CounterMetricFamily(
        "gputui_gpu_xid",
        "Xid faults seen on the GPU since the exporter started, by Xid number and kind "
        "(hardware, program, info) from NVIDIA's Xid catalogue",
        labels=[*LABELS, "xid", "kind"],
    )
    ecc = GaugeMetricFamily(
        "gputui_gpu_ecc_uncorrected_errors",
        "Uncorrected ECC errors (NVML): volatile since the driver loaded, aggregate for the "
        "GPU's life",
        labels=[*LABELS, "counter"],
    )
    remapped = GaugeMetricFamily(
        "gputui_gpu_remapped_rows",
        "Memory rows remapped (NVML), by the error that caused it",
        labels=[*LABELS, "cause"],
    )
    pending = GaugeMetricFamily(
        "gputui_gpu_remap_pending", "1 when a row remap waits for a GPU reset", labels=LABELS
    )
    failure = GaugeMetricFamily(
        "gputui_gpu_remap_failure", "1 when a row remap has failed", labels=LABELS
    )
    replay = GaugeMetricFamily(
        "gputui_gpu_pcie_replays", "PCIe replay counter (NVML)", labels=LABELS
    )
    link_max = GaugeMetricFamily(
        "gputui_gpu_nvlink_error_rate_max",
        "NVLink errors a minute on the GPU's worst link, by kind (crc, replay, recovery), "
        "between two reads of its counters a pass (60 s) apart",
        labels=[*LABELS, "counter"],
    )
    link_named = GaugeMetricFamily(
        "gputui_nvlink_error_rate",
        "NVLink errors a minute on a link whose rate stands out (at least 10x the node's "
        "median link and 100 a minute); only such links have a series",
        labels=[*LABELS, "link", "counter"],
    )
    pcie_rate = GaugeMetricFamily(
        "gputui_gpu_pcie_replay_rate", "PCIe replays a minute (NVML's counter)", labels=LABELS
    )
    for r in rows:
        labels = [str(r.index), r.uuid, host]
        for kind, per_min in r.nvlink_max:
            link_max.add_metric([*labels, kind], per_min)
        for link, kind, per_min in r.nvlink_named:
            link_named.add_metric([*labels, str(link), kind], per_min)
        if r.pcie_replay_rate is not None:
            pcie_rate.add_metric(labels, r.pcie_replay_rate)
        for w in WORDS:
            health.add_metric([*labels, w], 1.0 if r.word == w else 0.0)
        for number, kind, n in r.xids:
            xid.add_metric([*labels, str(number), kind], float(n))
        for name, v in (("volatile", r.ecc_volatile), ("aggregate", r.ecc_aggregate)):
            if v is not None:
                ecc.add_metric([*labels, name], float(v))
        for name, v in (("correctable", r.remap_corr), ("uncorrectable", r.remap_uncorr)):
            if v is not None:
                remapped.add_metric([*labels, name], float(v))
        if r.remap_pending is not None:
            pending.add_metric(labels, float(r.remap_pending))
        if r.remap_failure is not None:
            failure.add_metric(labels, float(r.remap_failure))
        if r.pcie_replay is not None:
            replay.add_metric(labels, float(r.pcie_replay))
    yield from (health, xid, ecc, remapped, pending, failure, replay)
    yield from (link_max, link_named, pcie_rate)


NAMES = (
    "gputui_gpu_health",
    "gputui_gpu_xid_total",
    "gputui_gpu_ecc_uncorrected_errors",
    "gputui_gpu_remapped_rows",
    "gputui_gpu_remap_pending",
    "gputui_gpu_remap_failure",
    "gputui_gpu_pcie_replays",
    "gputui_gpu_nvlink_error_rate_max",
    "gputui_nvlink_error_rate",
    "gputui_gpu_pcie_replay_rate",
)
