"""The fetched series laid out per GPU on the step grid: one array per reading.

A window of a cluster is read once into columns (`array('d')`, nan for "no value"), never
into one Snapshot per sample: 256 GPUs x 480 steps x a dozen readings is a few million
numbers, and the detector walks them by index.

Prometheus answers a range query at every step with the latest sample of the last five
minutes, so a node that left the scrape would seem to report its last values for five more
minutes. `timestamp()` of the utilization series says when each value was really scraped;
a value older than a few scrape intervals is dropped here, so a node missing from the scrape
has gaps where it was missing: from the first step whose latest value is older than one and a
half scrape intervals.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

from gputui.collect.prom.client import Series
from gputui.collect.prom.names import (
    CONTAINER_LABELS,
    NAMESPACE_LABELS,
    POD_LABELS,
    Family,
    first_label,
)

NAN = math.nan
SEEN = "seen"  # the column of scrape times (timestamp() of the utilization series)


@dataclass(frozen=True)
class Owner:
    """Whose GPU it was at a step: the pod (and its namespace and container) or the value
    of the label the user named with --job-label."""

    pod: str | None
    namespace: str | None
    container: str | None
    label: str | None = None  # --job-label's value

    def short(self) -> str:
        if self.pod:
            return f"pod {self.namespace}/{self.pod}" if self.namespace else f"pod {self.pod}"
        return self.label or "no pod"


@dataclass
class GpuColumns:
    """One GPU's readings over the window."""

    host: str
    gpu: str
    uuid: str | None
    model: str | None
    n: int
    cols: dict[str, array] = field(default_factory=dict)
    owner: list[int] = field(default_factory=list)  # per step: index into History.owners, -1

    def col(self, name: str) -> array:
        c = self.cols.get(name)
        if c is None:
            c = self.cols[name] = array("d", [NAN]) * self.n
        return c

    @property
    def key(self) -> str:
        return f"{self.host}:{self.gpu}"


@dataclass
class History:
    """Every GPU's columns on the grid start, start + step, ... (n steps)."""

    start: float
    step: float
    n: int
    family: Family
    gpus: list[GpuColumns]
    owners: list[Owner]
    notes: list[str] = field(default_factory=list)

    def time(self, k: int) -> float:
        return self.start + k * self.step


def build(
    family: Family,
    series: dict[str, list[Series]],
    start: float,
    step: float,
    n: int,
    job_label: str | None = None,
) -> History:
    """Columns from the answers: `series` maps a column name (a Reading's field, or SEEN)
    to the series fetched for it."""
    gpus: dict[tuple[str, str], GpuColumns] = {}
    owners: list[Owner] = []
    owner_ix: dict[Owner, int] = {}

    def gpu_of(labels: dict[str, str]) -> GpuColumns | None:
        g = labels.get("gpu")
        host = first_label(labels, family.host_labels)
        if g is None or host is None:
            return None
        key = (host, g)
        cols = gpus.get(key)
        if cols is None:
            cols = gpus[key] = GpuColumns(
                host, g, labels.get(family.uuid_label), labels.get("modelName"), n, owner=[-1] * n
            )
        return cols

    def owner_of(labels: dict[str, str]) -> int:
        o = Owner(
            first_label(labels, POD_LABELS),
            first_label(labels, NAMESPACE_LABELS),
            first_label(labels, CONTAINER_LABELS),
            labels.get(job_label) if job_label else None,
        )
        if o.pod is None and o.label is None:
            return -1
        ix = owner_ix.get(o)
        if ix is None:
            ix = owner_ix[o] = len(owners)
            owners.append(o)
        return ix

    owner_field = "owner" if "owner" in series else "util"
    scales = {r.field: r.scale for r in family.readings}
    for name, found in series.items():
        scale = scales.get(name, 1.0)
        for s in found:
            g = gpu_of(s.labels)
            if g is None:
                continue
            col = g.col(name)
            o = owner_of(s.labels) if name == owner_field else -1
            for t, v in zip(s.times, s.values, strict=False):
                k = round((t - start) / step)
                if 0 <= k < n:
                    if v == v:  # not nan
                        col[k] = v * scale
                    if o >= 0:
                        g.owner[k] = o
    hist = History(start, step, n, family, sorted(gpus.values(), key=_order), owners)
    for g in hist.gpus:
        _drop_stale(g, hist)
    return hist


def _order(g: GpuColumns) -> tuple[str, int, str]:
    return (g.host, int(g.gpu) if g.gpu.isdigit() else 1 << 30, g.gpu)


def _drop_stale(g: GpuColumns, hist: History) -> None:
    """Steps whose values were scraped longer ago than a few scrape intervals: nan, no
    owner (the node was not scraped then)."""
    seen = g.cols.get(SEEN)
    if seen is None:
        return
    times = sorted({x for x in seen if x == x})
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False) if b > a)
    interval = gaps[len(gaps) // 2] if gaps else hist.step
    # A value read at a step is at most one scrape interval old (the scrape before it);
    # half an interval more allows for a scrape that came late.
    limit = 1.5 * interval
    stale = [k for k, x in enumerate(seen) if x != x or hist.time(k) - x > limit]
    if not stale:
        return
    for c in g.cols.values():
        if c is seen:
            continue
        for k in stale:
            c[k] = NAN
    for k in stale:
        g.owner[k] = -1


def present_steps(g: GpuColumns) -> Iterable[int]:
    util = g.cols.get("util")
    if util is None:
        return ()
    return (k for k, x in enumerate(util) if x == x)
