"""The world probe of the host a job-wide verdict blames: that host and its neighbours, each
alone and then in pairs, kept as a `blamed_host_probe` record that joins the verdict.

Why the bisect and not one world: the question is which of host, link or peer is broken,
and only the host-alone and host-pair runs answer it (gputui.probe.world.bisect). Why it
never ends anything: a host whose GPUs a job still uses is refused by the world probe itself
(its `busy` stage names the job); the person ends that job first, on that host, through the
dashboard's way out. The judgement of the record is gputui.diagnose.merge.host_probe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gputui.diagnose.merge.host_blame import HostBlame
from gputui.probe.world.model import WorldOptions
from gputui.probe.world.report import WorldReport

# The record's "type": a key of `merge --json`'s last line, never a recording's record (no
# Watcher holds a merged verdict), so it has no shape in gputui.collect.trace.record_schema.
RECORD_TYPE = "blamed_host_probe"


def probe_blamed_host(
    blame: HostBlame, opts: WorldOptions, on_stage: Callable[[str], None] | None = None
) -> tuple[dict[str, Any], WorldReport | None]:
    """(record, report); never raises for a failing host (the world probe bounds each one by
    its --host-timeout); an error before anything ran is a `failed` record."""
    from gputui.probe.world.check import check_world

    t = time.time()
    try:
        rep = check_world(blame.hosts, opts, bisect=True, on_stage=on_stage)
    except (OSError, ValueError) as e:
        return {**_base(blame, t), "outcome": "failed", "ok": False, "error": str(e)}, None
    return report_record(blame, rep, t), rep


def report_record(blame: HostBlame, rep: WorldReport, t: float) -> dict[str, Any]:
    """What the run found: the hosts it blames, the pairs, hosts refused as busy."""
    busy = {r.host: r.why or "busy" for r in rep.world.results if r.stage == "busy" and not r.ok}
    b = rep.bisect
    bad_hosts = {h: why for h, why in rep.failed_hosts().items() if h not in busy}
    bad_pairs = [[a, c, why] for (a, c), why in (b.bad_pairs.items() if b else ())]
    bw = rep.world.busbw()
    rec = _base(blame, t)
    rec.update(
        outcome="refused" if blame.host in busy else "done",
        ok=rep.ok,
        world_ok=rep.world.ok,
        bad_hosts=bad_hosts,
        bad_pairs=bad_pairs,
        busy=busy,
        findings=rep.findings(),
        busbw_gbps=bw[-1]["busbw_gbps"] if bw and rep.world.ok else None,
        leftovers=dict(rep.leftovers),
        wall_s=round(rep.wall_s, 3),
        error=None,
    )
    return rec


def ras_blamed_here(ranked: Iterable[Any], hosts: Sequence[str] = ()) -> HostBlame | None:
    """The host NCCL RAS blames (gputui.diagnose.merge.host_blame.ras_blamed), as seen from
    this machine: its hostname is the neighbour when `hosts` does not hold the host, and its
    own names and addresses are never "another host". The one impure caller of the pure
    rule, for `check --probe-blamed` and the dashboard's B."""
    import socket

    from gputui.collect.this_host import is_this_host
    from gputui.diagnose.merge.host_blame import ras_blamed

    return ras_blamed(ranked, list(hosts), socket.gethostname(), is_this_host)


def _base(blame: HostBlame, t: float) -> dict[str, Any]:
    return {"type": RECORD_TYPE, "t": round(t, 3), **blame.to_json(), "hosts": blame.hosts}
