"""NVLink and PCIe error counters as rates against the node's own baseline, not totals.

Why rates: corrected link errors are normal. Healthy 4 x H200 GPUs (driver 580) read 7,300 to
8,400 NVLink errors each since boot and count 270-410 more a minute at rest (summed over 18
links and 4 counters). A total says nothing; a link whose rate jumps far above its
neighbours' is a link going bad (a cable, a connector, a switch port), and it slows every
collective that crosses it. Totals since boot are kept as context only, never as bad health.

What comes in: the `nvlink` part of the health records (gputui.collect.nvml.nvlink: each GPU's
per-link counter values, read once a pass, with the time of the read) and the PCIe replay
counter of the `counters` part. A replay hands back the same records, so it names the same
links (everything here is pure).

The rule, per link and per kind of error (CRC = CRC flit + CRC data, replay, recovery):

- the link's rate is the rise of its counter between two reads of its GPU at least
  MIN_SPAN_FRAC of a pass apart (a pass: every GPU's links read once, PASS_S = 60 s by
  default; the record says which), per minute; a counter that went down (the driver was
  reloaded) has no rate for that interval;
- the node's baseline for the kind is the median of the latest rates of the node's healthy
  links (those under FLOOR_PER_MIN; all links when none is), so neither one bad link nor a
  whole bad GPU moves it;
- a link is named when its rate is at least FACTOR (10) times the baseline AND at least
  FLOOR_PER_MIN (100) a minute: "GPU 3 link 7: NVLink CRC errors at 4,100/min against the
  node's 12/min". The floor is 4x the busiest healthy link seen (about 23 errors a minute,
  all kinds together); the factor keeps a noisy node's ordinary links unnamed.

PCIe replays the same way, per GPU: the rise over at least PCIE_MIN_SPAN_S between two
readings, against the median of the node's GPUs under PCIE_FLOOR_PER_MIN, named at
FACTOR times that and at least PCIE_FLOOR_PER_MIN (10) a minute.

Bounded: per GPU the last few reads (MAX_READS), at most MAX_GPUS GPUs and MAX_LINKS links.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

# The counters of a read, in the order the record lists them (nvmlNvLinkErrorCounter_t 0-3).
COUNTERS = ("replay", "recovery", "crc_flit", "crc_data")
KINDS = ("crc", "replay", "recovery")  # what is judged and shown: CRC sums flit and data
KIND_WORDS = {"crc": "CRC", "replay": "replay", "recovery": "recovery"}
PASS_S = 60.0  # a full pass over every GPU's links, when a record does not say
MIN_SPAN_FRAC = 0.9  # two reads of a GPU this much of a pass apart give a rate
FACTOR = 10.0  # named at this many times the node's baseline...
FLOOR_PER_MIN = 100.0  # ...and at least this many errors a minute on the link
PCIE_MIN_SPAN_S = 30.0
PCIE_FLOOR_PER_MIN = 10.0
MAX_READS = 4
MAX_GPUS = 64
MAX_LINKS = 18


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63 else None


def _time(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class LinkFinding:
    """A link (or a GPU's PCIe link, `link` None) whose error rate stands out."""

    gpu: int
    link: int | None
    kind: str  # "crc" | "replay" | "recovery" | "pcie_replay"
    per_min: float
    baseline: float
    t: float  # the read that gave the rate

    @property
    def where(self) -> str:
        return f"GPU {self.gpu}" + (f" link {self.link}" if self.link is not None else "")

    def words(self) -> str:
        """ "NVLink CRC errors at 4,100/min against the node's 12/min" (no GPU)."""
        what = (
            "PCIe replays"
            if self.link is None
            else f"NVLink {KIND_WORDS.get(self.kind, self.kind)} errors"
        )
        return f"{what} at {self.per_min:,.0f}/min against the node's {self.baseline:,.0f}/min"

    @property
    def text(self) -> str:
        return f"{self.where}: {self.words()}"

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "gpu": self.gpu,
            "link": self.link,
            "counter": self.kind,
            "per_min": round(self.per_min, 1),
            "baseline_per_min": round(self.baseline, 1),
            "t": round(self.t, 3),
            "strength": "context",
        }


def _kinds(values: Any) -> dict[str, int] | None:
    """One link's read ([replay, recovery, crc_flit, crc_data], None where n/a) by kind."""
    if not isinstance(values, list) or len(values) != len(COUNTERS):
        return None
    c = dict(zip(COUNTERS, (_count(v) for v in values), strict=True))
    out: dict[str, int] = {}
    for k in ("replay", "recovery"):
        if (v := c[k]) is not None:
            out[k] = v
    crc = [v for k in ("crc_flit", "crc_data") if (v := c[k]) is not None]
    if crc:
        out["crc"] = sum(crc)
    return out


@dataclass(frozen=True)
class _Read:
    t: float
    links: tuple[dict[str, int] | None, ...]  # per link: kind -> value; None: down or n/a


class LinkRates:
    """Every GPU's link reads and rates, the PCIe replay readings, and what stands out."""

    def __init__(self) -> None:
        self.reads: dict[int, deque[_Read]] = {}
        self.rates: dict[int, dict[int, dict[str, float]]] = {}  # gpu -> link -> kind -> /min
        self.rated_at: dict[int, float] = {}
        self.na: dict[int, dict[str, str]] = {}
        self.pass_s = PASS_S
        self.pcie: dict[int, deque[tuple[float, int]]] = {}
        self.pcie_rate: dict[int, tuple[float, float]] = {}  # gpu -> (per min, at)
        self.version = 0
        self._cache: tuple[int, tuple[LinkFinding, ...]] | None = None
        self._bases: tuple[int, dict[str, float | None]] = (-1, {})

    # ------------------------------------------------------------ input

    def add_record(self, part: Any) -> None:
        """The `nvlink` part of a health record (untrusted: a replay's file)."""
        if not isinstance(part, dict):
            return
        p = _time(part.get("pass_s"))
        if p is not None and 0 < p <= 86_400:
            self.pass_s = p
        reads = part.get("reads")
        for row in reads[:MAX_GPUS] if isinstance(reads, list) else []:
            if isinstance(row, dict):
                self._add_read(row)

    def _add_read(self, row: dict[str, Any]) -> None:
        gpu, t = _count(row.get("gpu")), _time(row.get("t"))
        if gpu is None or gpu >= MAX_GPUS or t is None:
            return
        na = row.get("na")
        if isinstance(na, dict):
            mine = self.na.setdefault(gpu, {})
            for k, v in list(na.items())[:8]:
                if isinstance(k, str) and isinstance(v, str):
                    mine[k[:32]] = v[:200]
        links = row.get("links")
        if not isinstance(links, list):
            self.version += 1
            return
        read = _Read(t, tuple(_kinds(v) for v in links[:MAX_LINKS]))
        past = self.reads.setdefault(gpu, deque(maxlen=MAX_READS))
        if past and t <= past[-1].t:
            return  # out of order or repeated: the rates stand
        base = next((r for r in reversed(past) if t - r.t >= MIN_SPAN_FRAC * self.pass_s), None)
        past.append(read)
        self.version += 1
        if base is None:
            return
        minutes = (t - base.t) / 60.0
        rates: dict[int, dict[str, float]] = {}
        for link, (new, old) in enumerate(
            zip(read.links, base.links, strict=False)
        ):  # a link may have gone
            if new is None or old is None:
                continue
            got = {
                k: (new[k] - old[k]) / minutes
                for k in KINDS
                if k in new and k in old and new[k] >= old[k]
            }
            if got:
                rates[link] = got
        self.rates[gpu] = rates
        self.rated_at[gpu] = t

    def add_pcie(self, gpu: int, t: float, value: Any) -> None:
        """A PCIe replay counter reading of the `counters` part, at its record's time."""
        v = _count(value)
        if v is None or gpu >= MAX_GPUS:
            return
        past = self.pcie.setdefault(gpu, deque(maxlen=MAX_READS * 4))
        if past and t <= past[-1][0]:
            return
        base = next((p for p in reversed(past) if t - p[0] >= PCIE_MIN_SPAN_S), None)
        past.append((t, v))
        if base is not None and v >= base[1]:
            self.pcie_rate[gpu] = ((v - base[1]) / ((t - base[0]) / 60.0), t)
            self.version += 1

    # ------------------------------------------------------------ judging

    def baseline(self, kind: str) -> float | None:
        """The node's rate for `kind`: the median of its healthy links' latest rates."""
        if self._bases[0] != self.version:  # faces ask every sample; reads come every few s
            self._bases = (self.version, {})
        known = self._bases[1]
        if kind not in known:
            rates = [r[kind] for links in self.rates.values() for r in links.values() if kind in r]
            known[kind] = _baseline(rates, FLOOR_PER_MIN)
        return known[kind]

    def pcie_baseline(self) -> float | None:
        return _baseline([r for r, _t in self.pcie_rate.values()], PCIE_FLOOR_PER_MIN)

    def findings(self) -> tuple[LinkFinding, ...]:
        """The links (and PCIe links) the rule names, worst first."""
        if self._cache is not None and self._cache[0] == self.version:
            return self._cache[1]
        out: list[LinkFinding] = []
        for kind in KINDS:
            base = self.baseline(kind)
            if base is None:
                continue
            cut = max(FLOOR_PER_MIN, FACTOR * base)
            for gpu, links in sorted(self.rates.items()):
                for link, r in sorted(links.items()):
                    if r.get(kind, 0.0) >= cut:
                        out.append(LinkFinding(gpu, link, kind, r[kind], base, self.rated_at[gpu]))
        base = self.pcie_baseline()
        if base is not None:
            cut = max(PCIE_FLOOR_PER_MIN, FACTOR * base)
            for gpu, (rate, t) in sorted(self.pcie_rate.items()):
                if rate >= cut:
                    out.append(LinkFinding(gpu, None, "pcie_replay", rate, base, t))
        found = tuple(sorted(out, key=lambda f: -f.per_min / max(f.baseline, 1.0)))
        self._cache = (self.version, found)
        return found

    # ------------------------------------------------------------ for the faces

    def since_boot(self, gpu: int) -> dict[str, int]:
        """The GPU's errors since boot by kind, summed over its links (context only)."""
        past = self.reads.get(gpu)
        if not past:
            return {}
        out: dict[str, int] = {}
        for link in past[-1].links:
            for k, v in (link or {}).items():
                out[k] = out.get(k, 0) + v
        return out

    def gpu_json(self, gpu: int) -> dict[str, Any] | None:
        """One GPU's NVLink part for `health.gpus[i].nvlink`, None when nothing is known."""
        past = self.reads.get(gpu)
        na = self.na.get(gpu)
        if not past and not na:
            return None
        out: dict[str, Any] = {}
        if past:
            last = past[-1]
            out["links_read"] = sum(1 for x in last.links if x is not None)
            out["read_at"] = round(last.t, 3)
            boot = self.since_boot(gpu)
            out["errors_since_boot"] = {**boot, "total": sum(boot.values())}
        if gpu in self.rates:
            links = self.rates[gpu].values()
            out["per_min"] = {
                k: round(sum(r.get(k, 0.0) for r in links), 1)
                for k in KINDS
                if any(k in r for r in links)
            }
            out["worst_link_per_min"] = {
                k: round(max(r.get(k, 0.0) for r in links), 1)
                for k in KINDS
                if any(k in r for r in links)
            }
        if na:
            out["na"] = dict(na)
        return out

    def node_json(self) -> dict[str, Any] | None:
        """The node's baselines (`health.nvlink`), None before any rate."""
        if not self.rates and not self.pcie_rate:
            return None
        base = {k: b for k in KINDS if (b := self.baseline(k)) is not None}
        out: dict[str, Any] = {
            "pass_s": self.pass_s,
            "baseline_per_min": {k: round(v, 1) for k, v in base.items()},
        }
        if (p := self.pcie_baseline()) is not None:
            out["pcie_replay_baseline_per_min"] = round(p, 1)
        return out

    def max_rates(self, gpu: int) -> dict[str, float]:
        """The GPU's worst link rate per kind (the exporter's per-GPU gauge)."""
        links = self.rates.get(gpu, {}).values()
        return {k: max(r[k] for r in links if k in r) for k in KINDS if any(k in r for r in links)}


def _baseline(rates: list[float], floor: float) -> float | None:
    if not rates:
        return None
    healthy = [r for r in rates if r < floor]
    import statistics  # only when rates are judged: its import costs 10 ms at start

    return statistics.median(healthy or rates)
