"""When the world fails (or with --bisect): each host alone, then host pairs, until named.

Why this order: a host that fails alone (no torch, a GPU that fails all_reduce, a rank that
crashes) is broken whatever its peers; testing it in pairs only repeats that. The hosts that
pass alone are then paired, in rounds where every host is in at most one pair (the
round-robin schedule of the intra-node probe), so a pair's bandwidth is its own link's. A host
that fails with every peer is the host; a single failing pair is the link; a pair far slower
than the others is a slow link. Each concurrent world gets its own port (PORT+1, PORT+2, ...),
so worlds that share a host (or, in tests, a machine) never collide.
"""

from __future__ import annotations

import json
import statistics
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from gputui.probe.schedule import round_robin
from gputui.probe.world.launch import run_on_host
from gputui.probe.world.model import WorldOptions, WorldRun
from gputui.probe.world.runner import resolve_address, run_world

SLOW_SHARE = 0.5  # a pair under half the median pair bandwidth is slow


@dataclass
class Bisect:
    alone: dict[str, WorldRun] = field(default_factory=dict)
    pairs: dict[tuple[str, str], WorldRun] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    bad_hosts: dict[str, str] = field(default_factory=dict)  # host -> why
    bad_pairs: dict[tuple[str, str], str] = field(default_factory=dict)


def _top_busbw(run: WorldRun) -> float | None:
    bw = run.busbw()
    return bw[-1]["busbw_gbps"] if bw else None


def _first_why(run: WorldRun) -> str:
    culprits = [r for r in run.results if not r.ok and not r.victim] or run.failed()
    if not culprits:
        return "failed"
    r = culprits[0]
    return f"{r.host}: {r.why}" if len(run.hosts) > 1 else (r.why or "failed")


def run_bisect(
    hosts: list[str],
    opts: WorldOptions,
    addresses: dict[str, str],
    known: dict[str, str] | None = None,
) -> Bisect:
    """Alone, then pairs of the hosts that passed alone; findings name the culprits.

    `known`: hosts the world already showed broken on their own, before any peer was
    involved (unreachable, no torch, GPUs busy): named as they are, not tried again."""
    b = Bisect()
    for h, why in (known or {}).items():
        b.bad_hosts[h] = why
        b.findings.append(f"host {h}: {why}")
    todo = [h for h in hosts if h not in b.bad_hosts]
    port = opts.port + 1
    with ThreadPoolExecutor(max_workers=max(1, min(opts.fanout, len(todo) or 1))) as pool:
        futs = {
            h: pool.submit(run_world, [h], opts, port=port + i, master=_self_address(opts))
            for i, h in enumerate(todo)
        }
        b.alone = {h: f.result() for h, f in futs.items()}
    port += len(hosts)
    for h, run in b.alone.items():
        if not run.ok:
            b.bad_hosts[h] = run.results[0].why or "failed"
            b.findings.append(f"host {h}: {b.bad_hosts[h]}")
    _node_probes(b, opts)
    good = [h for h in hosts if h not in b.bad_hosts]
    if len(good) >= 2:
        for rnd in round_robin(list(range(len(good)))):
            with ThreadPoolExecutor(max_workers=max(1, len(rnd))) as pool:
                futs2 = {}
                for k, (i, j) in enumerate(rnd):
                    pair = (good[i], good[j])
                    master = addresses.get(pair[0]) or resolve_address(pair[0], opts)
                    futs2[pair] = pool.submit(
                        run_world, list(pair), opts, port=port + k, master=master
                    )
                for pair, f in futs2.items():
                    b.pairs[pair] = f.result()
            port += len(rnd)
    _judge_pairs(b, good)
    return b


def node_finding(stdout: str) -> str | None:
    """The worst GPU or link of `gputui probe --json` output (None when it passed or said
    nothing readable): "GPU 5 is the broken GPU: all its 7 pairs failed (...)"."""
    try:
        data = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("ok", True):
        return None
    worst = data.get("worst") or {}
    return str(worst.get("text") or "") or None


def _node_probes(b: Bisect, opts: WorldOptions) -> None:
    """A host with several GPUs that failed alone: its pairwise node probe names the GPU."""
    todo = []
    for h, run in b.alone.items():
        r = run.results[0] if run.results else None
        if r is not None and not run.ok and r.gpus >= 2 and r.backend == "nccl":
            todo.append((h, min(r.gpus, opts.gpus_per_host or r.gpus)))
    if not todo:
        return

    def one(item: tuple[str, int]) -> tuple[str, str | None]:
        h, n = item
        rounds = n if n % 2 else n - 1
        args = [
            "probe",
            "--json",
            "--timeout",
            f"{opts.pair_timeout:g}",
            "--gpus",
            ",".join(map(str, range(n))),
        ]
        res = run_on_host(h, args, opts, opts.host_timeout + rounds * opts.pair_timeout)
        return h, node_finding(res[2])

    with ThreadPoolExecutor(max_workers=max(1, min(opts.fanout, len(todo)))) as pool:
        for h, text in pool.map(one, todo):
            if text:
                b.findings.append(f"host {h} (node probe): {text}")


def _self_address(opts: WorldOptions) -> str:
    """A host alone rendezvouses with itself: loopback needs no name resolution."""
    return "127.0.0.1"


def _judge_pairs(b: Bisect, good: list[str]) -> None:
    failed = {p: r for p, r in b.pairs.items() if not r.ok}
    for h in good:
        mine = [p for p in b.pairs if h in p]
        if len(mine) >= 2 and all(p in failed for p in mine):
            why = _first_why(failed[mine[0]])
            b.bad_hosts[h] = f"fails with every peer ({why})"
            b.findings.append(f"host {h} fails with every peer: {why}")
    for p, run in failed.items():
        if p[0] in b.bad_hosts or p[1] in b.bad_hosts:
            continue
        b.bad_pairs[p] = _first_why(run)
        b.findings.append(f"{p[0]}<->{p[1]}: {b.bad_pairs[p]}")
    bws = {p: _top_busbw(r) for p, r in b.pairs.items() if r.ok}
    vals = [v for v in bws.values() if v]
    if len(vals) >= 3:
        med = statistics.median(vals)
        for p, v in bws.items():
            if v is not None and v < SLOW_SHARE * med:
                others = statistics.median([x for q, x in bws.items() if q != p and x])
                b.bad_pairs[p] = f"{v:.3g} GB/s (others {others:.3g})"
                b.findings.append(f"{p[0]}<->{p[1]}: {v:.3g} GB/s (others {others:.3g})")
