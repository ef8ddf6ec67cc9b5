"""The world probe's data: the options of a run, what each host said, the whole run. Apart
from the code that launches, parses and judges, so that each of those imports it and none
imports another (gputui.probe.world.runner, launch, parse, report, bisect).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WorldOptions:
    launcher: str = "ssh"
    remote_gputui: str = "gputui"
    ssh_config: str | None = None
    ssh_options: Sequence[str] = ()
    connect_timeout: float = 10.0
    host_timeout: float = 60.0
    port: int = 29500
    gpus_per_host: int | None = None
    backend: str = "auto"  # auto: nccl where every host has GPUs, else gloo
    sizes: Sequence[int] = (1 << 20, 16 << 20, 64 << 20)  # GPU worlds (NCCL)
    gloo_sizes: Sequence[int] = (
        1 << 16,
        1 << 20,
    )  # CPU worlds: small, or it costs more than it tells
    iters: int = 5
    force: bool = False
    pair_timeout: float = 30.0  # the node probe's per-pair bound (probe --timeout), in bisect
    fanout: int = 64
    jobid: str | None = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    @property
    def rdzv_timeout(self) -> float:
        return max(5.0, min(30.0, self.host_timeout / 3))

    @property
    def pg_timeout(self) -> float:
        return max(5.0, self.host_timeout / 2)


@dataclass
class HostResult:
    """One host in one world: what it said, or why it said nothing."""

    host: str
    ok: bool = False
    stage: str = "launch"  # launch | torch | busy | rendezvous | ranks | done | stopped
    why: str | None = None
    victim: bool = False  # failed only because another host did (waited for it, stopped)
    ranks: int = 0
    gpus: int = 0
    base: int | None = None
    backend: str | None = None
    joined_s: float | None = None
    wall_s: float = 0.0
    torch: str | None = None
    nccl_version: str | None = None
    rank_results: list[dict[str, Any]] = field(default_factory=list)
    nccl: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


@dataclass
class WorldRun:
    hosts: list[str]
    master: str
    port: int
    results: list[HostResult]
    wall_s: float

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.ok for r in self.results)

    @property
    def size(self) -> int:
        return sum(r.ranks for r in self.results)

    def busbw(self) -> list[dict[str, Any]]:
        """Per size: the slowest rank's bus bandwidth (the world is as fast as its slowest)."""
        sizes: dict[int, list[float]] = {}
        for r in self.results:
            for rr in r.rank_results:
                for s in rr.get("sizes", []):
                    if s.get("busbw_gbps") is not None:
                        sizes.setdefault(s["bytes"], []).append(s["busbw_gbps"])
        return [
            {"bytes": b, "busbw_gbps": min(v), "max_gbps": max(v)} for b, v in sorted(sizes.items())
        ]

    def failed(self) -> list[HostResult]:
        return [r for r in self.results if not r.ok]
