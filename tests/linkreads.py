"""NVLink counter reads as the live monitor records them (gputui.collect.nvml.nvlink), for tests.

A healthy link counts what healthy 4 x H200 GPUs counted at rest: 445 errors since boot each
(replay 100, recovery 1, CRC flit 300, CRC data 44: 8,010 a GPU over 18 links, inside the
measured 7,300-8,400) and, per minute, 3 replays and 12 + 2 x GPU CRC errors (270-396 a GPU,
inside the measured 270-410).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

BASE = (100, 1, 300, 44)  # replay, recovery, CRC flit, CRC data since boot, per link


def link_values(
    gpu: int, link: int, minutes: float, bad: dict[tuple[int, int], float] | None = None
) -> list[int]:
    """One link's four counters `minutes` after the first read; `bad`: (gpu, link) -> the
    CRC errors a minute it adds."""
    crc = (12 + 2 * gpu) * minutes + (bad or {}).get((gpu, link), 0.0) * minutes
    return [BASE[0] + round(3 * minutes), BASE[1], BASE[2] + round(crc), BASE[3]]


def read(
    gpu: int,
    t: float,
    minutes: float,
    *,
    links: int = 18,
    bad: dict[tuple[int, int], float] | None = None,
) -> dict[str, Any]:
    return {
        "gpu": gpu,
        "t": t,
        "links": [link_values(gpu, k, minutes, bad) for k in range(links)],
    }


def health(t: float, *reads: dict[str, Any], pass_s: float = 60.0, **extra: Any) -> dict:
    """A health record holding NVLink reads (and any other part, e.g. counters=...)."""
    rec: dict[str, Any] = {"type": "health", "t": t, "started": 0.0, **extra}
    if reads:
        rec["nvlink"] = {
            "pass_s": pass_s,
            "counters": ["replay", "recovery", "crc_flit", "crc_data"],
            "reads": list(reads),
        }
    return rec


def passes(
    n: int,
    *,
    gpus: int = 4,
    t0: float = 1000.0,
    pass_s: float = 60.0,
    links: int = 18,
    bad: dict[tuple[int, int], float] | None = None,
) -> list[dict]:
    """The records of `n` passes on the live schedule: one GPU per slot, each GPU once a pass."""
    slot = pass_s / gpus
    out = []
    for k in range(n):
        for g in range(gpus):
            t = t0 + k * pass_s + g * slot
            minutes = (t - t0 - g * slot) / 60.0
            out.append(health(t, read(g, t, minutes, links=links, bad=bad), pass_s=pass_s))
    return out


def with_records(snaps, records: list[dict]):
    """The samples, each record in the first sample at or after its time."""
    pending = sorted(records, key=lambda r: r["t"])
    for s in snaps:
        here = []
        while pending and pending[0]["t"] <= s.t:
            here.append(pending.pop(0))
        yield replace(s, records=s.records + tuple(here)) if here else s
