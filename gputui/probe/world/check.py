"""The whole world check, as `gputui probe --hosts` and the world screen run it.

Resolve the first host's address, run the world, bisect when it failed (or when asked), then
the cleanup check on every host. Stages are announced through `on_stage` (the CLI prints them
on a terminal; the screen shows them), and the answer is one WorldReport.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gputui.probe.world.bisect import run_bisect
from gputui.probe.world.launch import run_on_host
from gputui.probe.world.model import WorldOptions
from gputui.probe.world.report import WorldReport
from gputui.probe.world.runner import resolve_address, run_world
from gputui.tools.fleet import run as fleet

SELF_STAGES = ("launch", "torch", "busy")  # failures a host has on its own, before any peer


def check_world(
    hosts: list[str],
    opts: WorldOptions,
    *,
    bisect: bool = False,
    on_stage: Callable[[str], None] | None = None,
) -> WorldReport:
    """Never raises for a failing host; bounded by the options' timeouts."""
    say = on_stage or (lambda _what: None)
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
        found = pool.map(lambda h: resolve_address(h, opts), hosts)
        addresses = dict(zip(hosts, found, strict=True))
    say(f"world: {len(hosts)} hosts, rendezvous {addresses[hosts[0]]}:{opts.port}")
    world = run_world(hosts, opts, master=addresses[hosts[0]])
    rep = WorldReport(world, addresses)
    if (not world.ok and len(hosts) > 1) or bisect:
        say("bisect: each host alone, then host pairs")
        known = {
            r.host: r.why or r.stage
            for r in world.results
            if not r.ok and not r.victim and r.stage in SELF_STAGES
        }
        rep.bisect = run_bisect(hosts, opts, addresses, known)
    say("cleanup check on every host")
    rep.leftovers, rep.unchecked = reap_all(hosts, opts)
    rep.wall_s = time.monotonic() - start
    return rep


def reap_all(hosts: list[str], opts: WorldOptions) -> tuple[dict[str, str], dict[str, str]]:
    """The final check over the launcher: anything of this run still on a host is killed and
    reported. ({host: what was left}, {host: why it could not be checked})."""
    args = ["probe", "--world-reap", opts.token]
    left: dict[str, str] = {}
    unchecked: dict[str, str] = {}

    def one(h: str):
        res = run_on_host(h, args, opts, 20.0)
        for line in res[2].splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict) and ev.get("event") == "reap":
                return h, ev.get("found") or [], None
        return h, None, fleet._last_line(res[3]) or f"{res[0]}, exit {res[1]}"

    seen: set[int] = set()  # `local`: every host is this machine, one process list
    with ThreadPoolExecutor(max_workers=max(1, min(opts.fanout, len(hosts)))) as pool:
        for h, found, why in pool.map(one, hosts):
            if why:
                unchecked[h] = why
            elif found and not (opts.launcher == "local" and seen.issuperset(found)):
                seen.update(found)
                left[h] = f"{len(found)} process(es): pid {', '.join(map(str, found[:8]))}"
    return left, unchecked
