"""The world probe's answer: a host table, the world's figures, the host-pair matrix, findings.

Text for people; `--json` is one JSON object per line (`kind`: host, world, alone, pair,
finding, nccl, cleanup, summary), each failed host's `host` line naming it and why, so a
script can `grep '"ok": false'` or load the lines one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputui.jsonout import dumps
from gputui.probe.world.bisect import Bisect
from gputui.probe.world.model import HostResult, WorldRun
from gputui.probe.world.nccl import summary
from gputui.textsafe import clean


@dataclass
class WorldReport:
    world: WorldRun
    addresses: dict[str, str]
    bisect: Bisect | None = None
    leftovers: dict[str, str] = field(default_factory=dict)  # host -> what was found/killed
    unchecked: dict[str, str] = field(default_factory=dict)  # host -> why the check failed
    wall_s: float = 0.0

    def failed_hosts(self) -> dict[str, str]:
        """host -> why, for every host to blame (bisect's verdict first, victims left out)."""
        out: dict[str, str] = {}
        if self.bisect is not None:
            out.update(self.bisect.bad_hosts)
        for r in self.world.results:
            if not r.ok and not r.victim and r.host not in out:
                out[r.host] = f"{r.stage}: {r.why}"
        return out

    @property
    def ok(self) -> bool:
        b = self.bisect
        return self.world.ok and not (b and (b.bad_hosts or b.bad_pairs)) and not self.leftovers

    def findings(self) -> list[str]:
        b = self.bisect
        out = list(b.findings) if b is not None else []
        named = set(b.bad_hosts) if b is not None else set()
        out += [f"host {h}: {why}" for h, why in self.failed_hosts().items() if h not in named]
        if not self.world.ok and not out:
            out.append("every host and host pair passes alone; only the whole world fails")
        for h, what in self.leftovers.items():
            out.append(f"host {h}: processes left running were killed ({what})")
        return out


def _size(n: int) -> str:
    for unit, s in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << s:
            return f"{n / (1 << s):g} {unit}"
    return f"{n} B"


def _nccl(world: WorldRun) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for r in world.results:
        if r.nccl:
            if not merged:
                merged = {**r.nccl, "transports": dict(r.nccl.get("transports") or {})}
            else:
                merged["transports"].update(r.nccl.get("transports") or {})
    return merged


def _status(r: HostResult) -> str:
    if r.ok:
        return "ok"
    if r.victim:
        return f"peer failed ({r.why})"
    return f"FAILED {r.stage}: {r.why}"


def _bw(run: WorldRun | None) -> str:
    bw = run.busbw() if run else []
    return f"{bw[-1]['busbw_gbps']:.3g}" if bw and run and run.ok else "FAIL" if run else "-"


def text(rep: WorldReport) -> str:
    w = rep.world
    backend = next((r.backend for r in w.results if r.backend), "?")
    head = "ok" if rep.ok else "FAILED"
    hosts = f"{len(w.hosts)} host{'s' if len(w.hosts) > 1 else ''}"
    ranks = f"{w.size} ranks ({backend})" if w.size else "no ranks started"
    lines = [
        f"world probe: {hosts}, {ranks}, rendezvous on {w.master}:{w.port}: "
        f"{head} in {rep.wall_s:.1f} s",
        "",
    ]
    width = max(4, *(len(h) for h in w.hosts))
    lines.append(f"{'host':<{width}}  {'address':<15} ranks  joined  status")
    for r in w.results:
        joined = f"{r.joined_s:.2f}s" if r.joined_s is not None else "-"
        addr = clean(rep.addresses.get(r.host, ""), limit=15)
        lines.append(
            f"{clean(r.host):<{width}}  {addr:<15} {r.ranks or '-':>5}  {joined:>6}  {_status(r)}"
        )
    bw = w.busbw()
    if bw:
        barrier = max((x.get("barrier_s") or 0) for r in w.results for x in r.rank_results)
        lines += ["", f"barrier: {barrier * 1000:.1f} ms; all_reduce bus bandwidth (slowest rank):"]
        lines += [f"  {_size(s['bytes']):>9}: {s['busbw_gbps']:.3g} GB/s" for s in bw]
    b = rep.bisect
    if b is not None:
        lines += ["", "bisect, each host alone (all_reduce GB/s at the largest size):"]
        for h in w.hosts:
            run = b.alone.get(h)
            if run is not None and run.ok:
                cell = _bw(run)
            else:
                again = "" if run is not None else " (as in the world; not tried again)"
                cell = f"FAIL: {clean(b.bad_hosts.get(h, ''))}{again}"
            lines.append(f"  {clean(h):<{width}}  {cell}")
        if b.pairs:
            hs = [h for h in w.hosts if any(h in p for p in b.pairs)]
            cw = max(7, *(len(h) for h in hs))
            lines += ["", "host pairs (all_reduce GB/s at the largest size):"]
            lines.append(" " * (width + 2) + "".join(f"{clean(h):>{cw}}" for h in hs))
            for a in hs:
                cells = []
                for c in hs:
                    pair_run = b.pairs.get((a, c)) or b.pairs.get((c, a))
                    cells.append(f"{'-' if a == c else _bw(pair_run):>{cw}}")
                lines.append(f"{clean(a):<{width}}  " + "".join(cells))
    found = rep.findings()
    if found:
        lines += ["", "findings:"] + [f"  {clean(f)}" for f in found]
    nc = summary(_nccl(w))
    if nc:
        lines += ["", clean(nc)]
    left = "none" if not rep.leftovers else ", ".join(rep.leftovers)
    checked = len(w.hosts) - len(rep.unchecked)
    lines += ["", f"left running: {left} (checked on {checked} of {len(w.hosts)} hosts)"]
    for h, why in rep.unchecked.items():
        lines.append(f"  not checked on {clean(h)}: {clean(why)}")
    return "\n".join(lines)


def json_lines(rep: WorldReport, exit_code: int) -> list[str]:
    w = rep.world
    bad = rep.failed_hosts()
    out: list[dict[str, Any]] = []
    for r in w.results:
        out.append(
            {
                "kind": "host",
                "host": r.host,
                "address": rep.addresses.get(r.host),
                "ok": r.host not in bad and (r.ok or r.victim),
                "stage": r.stage,
                "why": bad.get(r.host) or r.why,
                "victim": r.victim and r.host not in bad,
                "ranks": r.ranks,
                "gpus": r.gpus,
                "backend": r.backend,
                "joined_s": r.joined_s,
                "torch": r.torch,
                "nccl": r.nccl_version,
                "wall_s": r.wall_s,
            }
        )
    barrier = max(
        (x.get("barrier_s") or 0 for r in w.results for x in r.rank_results), default=None
    )
    out.append(
        {
            "kind": "world",
            "ok": w.ok,
            "hosts": w.hosts,
            "ranks": w.size,
            "master": f"{w.master}:{w.port}",
            "barrier_s": barrier,
            "rendezvous_s": max((r.joined_s or 0 for r in w.results), default=None),
            "sizes": w.busbw(),
            "wall_s": w.wall_s,
        }
    )
    b = rep.bisect
    if b is not None:
        for h in w.hosts:
            run = b.alone.get(h)
            if run is None:
                out.append(
                    {
                        "kind": "alone",
                        "host": h,
                        "ok": False,
                        "why": b.bad_hosts.get(h),
                        "sizes": [],
                        "tried": False,
                    }
                )
                continue
            out.append(
                {
                    "kind": "alone",
                    "host": h,
                    "ok": run.ok,
                    "why": b.bad_hosts.get(h),
                    "sizes": run.busbw(),
                }
            )
        for p, run in b.pairs.items():
            out.append(
                {
                    "kind": "pair",
                    "hosts": list(p),
                    "ok": run.ok and p not in b.bad_pairs,
                    "why": b.bad_pairs.get(p),
                    "sizes": run.busbw(),
                }
            )
    out += [{"kind": "finding", "text": f} for f in rep.findings()]
    nc = _nccl(w)
    if nc:
        out.append({"kind": "nccl", **nc})
    out.append({"kind": "cleanup", "left": rep.leftovers, "unchecked": rep.unchecked})
    out.append(
        {
            "kind": "summary",
            "ok": rep.ok,
            "exit": exit_code,
            "failed_hosts": bad,
            "wall_s": round(rep.wall_s, 3),
        }
    )
    return [dumps(o) for o in out]
