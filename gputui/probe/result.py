"""What a probe run produced: per ordered pair copies, per pair all_reduce, failures; as JSON.

The JSON is the contract for scripts (`gputui probe --json`) and for saved probes, so it
always lists every ordered pair and every pair, with null figures and ok=false where a pair
failed or never ran: a consumer can build the matrix without guessing what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Pair = tuple[int, int]


@dataclass
class CopyResult:
    """One direction of a peer copy: `bytes` from `src` to `dst`, checked on arrival."""

    src: int
    dst: int
    gbps: float | None = None
    bytes: int = 0
    ok: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "dst": self.dst,
            "gbps": self.gbps,
            "bytes": self.bytes,
            "ok": self.ok,
        }


@dataclass
class AllReduceResult:
    """A 2-rank all_reduce: bus bandwidth of the large message, latency of a small one."""

    pair: Pair
    busbw_gbps: float | None = None
    latency_us: float | None = None
    bytes: int = 0
    ok: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "pair": list(self.pair),
            "busbw_gbps": self.busbw_gbps,
            "latency_us": self.latency_us,
            "bytes": self.bytes,
            "ok": self.ok,
        }


@dataclass
class Topology:
    """What the hardware promises for a pair: NVLink count, PCIe path (None = unknown)."""

    pair: Pair
    nvlinks: int | None = None
    pcie: str | None = None  # nvidia-smi topo's words: PIX, PXB, PHB, NODE, SYS

    @property
    def label(self) -> str:
        if self.nvlinks:
            return f"NV{self.nvlinks}"
        return self.pcie or "N/A"

    def to_json(self) -> dict[str, Any]:
        return {
            "pair": list(self.pair),
            "label": self.label,
            "nvlinks": self.nvlinks,
            "pcie": self.pcie,
        }


@dataclass
class PairResult:
    """Everything one pair's worker reported, or why it reported nothing."""

    pair: Pair
    round: int = 0
    ok: bool = False
    reason: str | None = None  # one line, set when not ok
    copies: list[CopyResult] = field(default_factory=list)
    allreduce: AllReduceResult | None = None
    elapsed_s: float | None = None

    def copy(self, src: int, dst: int) -> CopyResult | None:
        return next((c for c in self.copies if c.src == src and c.dst == dst), None)


@dataclass
class ProbeReport:
    devices: list[int]
    backend: str
    size: int
    timeout_s: float
    pairs: list[PairResult] = field(default_factory=list)
    topology: dict[Pair, Topology] = field(default_factory=dict)
    wall_s: float = 0.0
    cancelled: bool = False
    started_at: str = ""
    host: str = ""

    @property
    def ok(self) -> bool:
        return not self.cancelled and bool(self.pairs) and all(p.ok for p in self.pairs)

    @property
    def failures(self) -> list[PairResult]:
        return [p for p in self.pairs if not p.ok]

    def pair(self, a: int, b: int) -> PairResult | None:
        key = {a, b}
        return next((p for p in self.pairs if set(p.pair) == key), None)

    def link(self, a: int, b: int) -> Topology | None:
        return self.topology.get((a, b)) or self.topology.get((b, a))


def pair_from_worker(pair: Pair, msg: dict[str, Any]) -> PairResult:
    """A PairResult from the worker's JSON result line (see worker.run_pair)."""
    copies = [
        CopyResult(
            int(c["src"]), int(c["dst"]), c.get("gbps"), int(c.get("bytes", 0)), bool(c.get("ok"))
        )
        for c in msg.get("copy", [])
    ]
    ar_msg = msg.get("allreduce")
    ar = None
    if ar_msg:
        ar = AllReduceResult(
            pair,
            ar_msg.get("busbw_gbps"),
            ar_msg.get("latency_us"),
            int(ar_msg.get("bytes", 0)),
            bool(ar_msg.get("ok")),
        )
    ok = bool(msg.get("ok")) and all(c.ok for c in copies) and bool(ar and ar.ok)
    reason = None if ok else (msg.get("reason") or "worker reported a failure")
    return PairResult(
        pair, ok=ok, reason=reason, copies=copies, allreduce=ar, elapsed_s=msg.get("elapsed_s")
    )
