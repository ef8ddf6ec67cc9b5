"""GPU health, judged: one word per GPU (ok / degraded / failed) with its reason, and the
findings that put a GPU's fault or a program's Xid at the head of a stalled job's verdict.

`HealthTracker.update(snap)` reads the `health` records of a snapshot (gputui.collect.nvml.health
makes them live; a replay hands back the recorded ones at their time) and the snapshot's
lost GPUs, so live and replay judge alike. Pure: no NVML, no files.

The words:

- failed: the GPU is lost (GPU_IS_LOST), took a hardware Xid that the catalogue calls
  failed (48, 62, 64, 74, 79, 95, 119, 120, 140, 154), or its row remapping failed.
- degraded: uncorrected ECC errors since the driver loaded (volatile), a pending row remap
  (a reset applies it), or a hardware Xid the catalogue calls degraded (61, 63, 92, 94, an
  unknown number).
- ok: none of those. A program's Xid (13, 31, 43) leaves the GPU ok: it is a rank's cause.
  Readings that are not supported (n/a) never make a GPU degraded.

`sick()` is what makes `check` exit 3 (exitcodes.SICK_GPU) when no job is stalled.

NVLink and PCIe error counters are judged as rates against the node's own baseline
(gputui.diagnose.health.link_rates, `links`): a link whose rate stands out is a finding (context
strength; named beside a straggler or a hang on its GPU), never a health word of its own,
and totals since boot are context only.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from gputui.collect.nvml import xid as X
from gputui.diagnose.health.link_rates import LinkRates

MAX_EVENTS = 500  # newest kept
SAME_EVENT_S = 5.0  # an NVML event and a kernel line of one Xid on one GPU are one event


@dataclass(frozen=True)
class GpuHealth:
    gpu: int
    word: str  # "ok" | "degraded" | "failed"
    reason: str = ""

    @property
    def mark(self) -> str:
        """A short mark for the GPU panels ("" when ok)."""
        return {"failed": "✖ FAILED", "degraded": "! DEGRADED"}.get(self.word, "")


def _num(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _event(d: Any) -> X.XidEvent | None:
    """A recorded event (untrusted: a replay's file) -> XidEvent, None when malformed."""
    if not isinstance(d, dict):
        return None
    t, xid = d.get("t"), _num(d.get("xid"))
    if not isinstance(t, (int, float)) or isinstance(t, bool) or xid is None or xid > 99_999:
        return None
    name = d.get("name")
    return X.XidEvent(
        float(t),
        xid,
        "kernel" if d.get("source") == "kernel" else "nvml",
        gpu=_num(d.get("gpu")),
        pci=d["pci"][:16] if isinstance(d.get("pci"), str) else None,
        pid=_num(d.get("pid")),
        name=name[:64] if isinstance(name, str) else None,
        text=d["text"][:500] if isinstance(d.get("text"), str) else "",
    )


class HealthTracker:
    """What is known of every GPU's health, from the records seen so far."""

    def __init__(self) -> None:
        self.counters: dict[int, dict[str, Any]] = {}
        self.events: deque[X.XidEvent] = deque(maxlen=MAX_EVENTS)
        self.notes: list[str] = []
        self.started: float | None = None
        self.lost: dict[int, str] = {}
        self.version = 0  # bumped at every change (faces redraw, check prints a line)
        # (gpu, xid) -> faults seen since gputui started (kernel lines from before the start
        # are shown but not counted): the exporter's counter, which never goes down.
        self.counts: dict[tuple[int | None, int], int] = {}
        # The GPUs that are not ok, replaced whole at each update: what another thread (the
        # dashboard's) reads without a lock.
        self.marks: dict[int, GpuHealth] = {}
        self.links = LinkRates()  # NVLink and PCIe error rates, and the links that stand out
        # words() of every GPU, with the versions it was judged at: `check` asks at every
        # sample, and nothing it depends on changes without a version bump.
        self._words: tuple[tuple[int, int], dict[int, GpuHealth]] | None = None

    def update(self, snap: Any) -> None:
        before = self.version
        self._update(snap)
        if self.version != before:
            self.marks = {h.gpu: h for h in self.sick(getattr(snap, "gpus", ()))}

    def _update(self, snap: Any) -> None:
        for rec in getattr(snap, "records", ()):
            if isinstance(rec, dict) and rec.get("type") == "health":
                self._record(rec)
        for g in getattr(snap, "gpus", ()):
            na = g.na
            if not na:
                continue  # every reading there (most GPUs, most samples)
            why = na.get("gpu") if isinstance(na, dict) else None
            if why and "lost" in why.lower() and g.index not in self.lost:
                self.lost[g.index] = why
                self.version += 1

    def _record(self, rec: dict[str, Any]) -> None:
        started = rec.get("started")
        if isinstance(started, (int, float)) and not isinstance(started, bool):
            self.started = float(started) if self.started is None else self.started
        counters = rec.get("counters")
        t = rec.get("t")
        t = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None
        if isinstance(counters, dict):
            for k, row in list(counters.items())[:64]:
                if isinstance(k, str) and k.isdigit() and isinstance(row, dict):
                    self.counters[int(k)] = row
                    if row.get("lost") is True:
                        self.lost.setdefault(int(k), "GPU is lost")
                    if t is not None and "pcie_replay" in row:
                        self.links.add_pcie(int(k), t, row["pcie_replay"])
        self.links.add_record(rec.get("nvlink"))
        for d in rec.get("events", [])[:1000] if isinstance(rec.get("events"), list) else []:
            ev = _event(d)
            if ev is not None:
                self._add(ev)
        for n in rec.get("notes", [])[:20] if isinstance(rec.get("notes"), list) else []:
            if isinstance(n, str) and n[:300] not in self.notes:
                self.notes.append(n[:300])
        self.version += 1

    def _add(self, ev: X.XidEvent) -> None:
        """Keep one event per fault: the kernel's line (it names the pid) and NVML's event of
        the same Xid on the same GPU within SAME_EVENT_S are merged."""
        for i, old in enumerate(self.events):
            if old.xid != ev.xid or abs(old.t - ev.t) > SAME_EVENT_S:
                continue
            if old.gpu is not None and ev.gpu is not None and old.gpu != ev.gpu:
                continue
            if old.source == ev.source:
                if old == ev:
                    return  # the same line read twice
                continue
            kern, nvml = (old, ev) if old.source == "kernel" else (ev, old)
            gpu = kern.gpu if kern.gpu is not None else nvml.gpu
            self.events[i] = X.XidEvent(
                min(old.t, ev.t), ev.xid, "kernel", gpu, kern.pci, kern.pid, kern.name, kern.text
            )
            return
        self.events.append(ev)
        if self.started is None or ev.t >= self.started:
            key = (ev.gpu, ev.xid)
            self.counts[key] = self.counts.get(key, 0) + 1

    # ------------------------------------------------------------ judging

    def words(self, gpus: Any = None) -> dict[int, GpuHealth]:
        """The health word of every GPU known (from counters, events, lost GPUs); only of
        `gpus` when given (a snapshot's GPUs: `--gpus` watches some GPUs of the node)."""
        if gpus:
            idx = {g.index for g in gpus}
            return {i: self.word(i) for i in sorted(idx)}
        at = (self.version, self.links.version)
        if self._words is not None and self._words[0] == at:
            return dict(self._words[1])
        idx = set(self.counters) | set(self.lost) | set(self.links.reads)
        idx |= {e.gpu for e in self.events if e.gpu is not None}
        words = {i: self.word(i) for i in sorted(idx)}
        self._words = (at, words)
        return dict(words)

    def word(self, gpu: int) -> GpuHealth:
        failed: list[str] = []
        degraded: list[str] = []
        if gpu in self.lost:
            failed.append(f"lost ({self.lost[gpu]})")
        for e in self.events:
            if e.gpu != gpu:
                continue
            i = X.info(e.xid)
            if i.kind != X.HARDWARE:
                continue
            said = f"Xid {e.xid}: {i.meaning}"
            (failed if i.severity == X.FAILED else degraded).append(said)
        c = self.counters.get(gpu, {})
        if c.get("remap_failure") is True:
            failed.append("row remapping failed")
        if (_num(c.get("ecc_uncorrected_volatile")) or 0) > 0:
            degraded.append(f"{c['ecc_uncorrected_volatile']} uncorrected ECC error(s)")
        if c.get("remap_pending") is True:
            degraded.append("row remap pending (a GPU reset applies it)")
        if failed:
            return GpuHealth(gpu, X.FAILED, "; ".join(dict.fromkeys(failed + degraded)))
        if degraded:
            return GpuHealth(gpu, X.DEGRADED, "; ".join(dict.fromkeys(degraded)))
        return GpuHealth(gpu, X.OK)

    def sick(self, gpus: Any = None) -> list[GpuHealth]:
        """The GPUs that are not ok: `check` exits 3 when there are any and no job hangs."""
        return [h for h in self.words(gpus).values() if h.word != X.OK]

    def age(self, ev: X.XidEvent, now: float) -> str:
        """ "3 s ago", or "41 min ago, before gputui started"."""
        s = max(0.0, now - ev.t)
        when = f"{s:.0f} s ago" if s < 120 else f"{s / 60:.0f} min ago"
        if self.started is not None and ev.t < self.started:
            when += ", before gputui started"
        return when

    def to_json(self, now: float | None = None) -> dict[str, Any]:
        """check --json / snapshot --json / bundle: every GPU's word, counters, Xid events."""
        words = self.words()
        out: dict[str, Any] = {
            "gpus": {str(i): self._gpu_json(i, h) for i, h in words.items()},
            "xids": [
                {**e.to_json(), **({"age": self.age(e, now)} if now is not None else {})}
                for e in self.events
            ],
            "notes": list(self.notes),
        }
        if (node := self.links.node_json()) is not None:
            out["nvlink"] = node
        out["findings"] = [f.to_json() for f in self.links.findings()]
        return out

    def _gpu_json(self, i: int, h: GpuHealth) -> dict[str, Any]:
        row: dict[str, Any] = {
            "health": h.word,
            "reason": h.reason,
            "counters": {k: v for k, v in self.counters.get(i, {}).items() if k != "na"},
            "na": self.counters.get(i, {}).get("na", {}),
        }
        if (links := self.links.gpu_json(i)) is not None:
            row["nvlink"] = links  # rates per minute; totals since boot are context only
        if (pcie := self.links.pcie_rate.get(i)) is not None:
            row["pcie_replay_per_min"] = round(pcie[0], 1)
        return row
