"""One host's launcher run -> HostResult: its events read, and one line saying why it failed.

Why a separate step: the launcher's view (ssh refused, a timeout, exit 127) and the worker's
own events (no torch, cannot reach the first host, a rank killed) are two sources of the same
answer, and the worker's is the better one when there is one. A host that only waited for
another (rendezvous incomplete) or was stopped after another failed is a *victim*: it is
reported, but never blamed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gputui.probe.world.model import HostResult, WorldOptions
from gputui.textsafe import clean
from gputui.tools.fleet.run import HostRun

WHY_LIMIT = 300


def _events(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict) and isinstance(ev.get("event"), str):
            out.append(ev)
    return out


_SOURCE = re.compile(r"\[/[^\]]*\.(?:cc|cpp|h):\d+\]\s*")
_ADVICE = re.compile(r"\s*This is typically caused by.*$")


def short_error(why: str) -> str:
    """gloo/NCCL errors without the source path and the stock advice: the part that names."""
    return _ADVICE.sub("", _SOURCE.sub("", why)).strip()


def _rank_why(r: dict[str, Any], gpus: int) -> str:
    where = f"GPU {r.get('local')}" if gpus else "CPU"
    return f"rank {r.get('rank')} ({where}): {short_error(str(r.get('why') or 'failed'))}"


def _launch_why(run: HostRun, opts: WorldOptions) -> str:
    if run.outcome == "timeout":
        return f"no answer within {opts.host_timeout:g} s (killed)"
    if run.rc == 127:
        return f"{opts.remote_gputui} not found on the host ({run.error or 'exit 127'})"
    return run.error or f"{opts.launcher} failed ({run.outcome}, exit {run.rc})"


def host_result(run: HostRun, opts: WorldOptions) -> HostResult:
    res = HostResult(host=run.host, wall_s=round(run.seconds, 3))
    evs = _events(run.stdout)
    for ev in evs:
        kind = ev["event"]
        if kind == "start":
            res.stage = "started"
        elif kind == "error":
            res.stage = str(ev.get("stage") or "error")
            res.why = str(ev.get("why") or "failed")
            # The first host (the store) went away under it: stopped because another host
            # failed. Seen under load: b's "Failed to recv, got 0 bytes. Connection was
            # likely closed" when a was stopped after c refused ssh, and b was blamed.
            res.victim = res.stage not in ("torch", "busy", "launch") and _peer_failure(res.why)
        elif kind == "rendezvous":
            res.joined_s = ev.get("joined_s")
            if ev.get("ok"):
                res.stage = "ranks"
                res.base, res.ranks, res.gpus = (
                    ev.get("base"),
                    ev.get("ranks", 0),
                    ev.get("gpus", 0),
                )
                res.backend = ev.get("backend")
                res.torch, res.nccl_version = ev.get("torch"), ev.get("nccl")
            else:
                res.stage = "rendezvous"
                res.missing = [str(h) for h in ev.get("missing") or []]
                res.why = f"waited {ev.get('joined_s')} s; never joined: {', '.join(res.missing)}"
                res.victim = True
        elif kind == "rank":
            res.rank_results.append(ev)
            res.nccl_version = res.nccl_version or ev.get("nccl")
        elif kind == "nccl":
            res.nccl = {k: v for k, v in ev.items() if k not in ("event", "i")}
        elif kind == "done":
            res.ok = bool(ev.get("ok"))
            res.stage = "done"
    bad = [r for r in res.rank_results if not r.get("ok")]
    if res.stage == "done" and bad:
        res.ok = False
        res.stage = "ranks"
        res.why = "; ".join(_rank_why(r, res.gpus) for r in bad[:4])
        res.victim = all(_peer_failure(r.get("why") or "") for r in bad)
    elif res.stage in ("launch", "started") and res.why is None:
        if run.outcome == "cancelled":
            res.stage, res.why, res.victim = "stopped", "stopped: another host had failed", True
        elif res.stage == "started" and run.outcome != "timeout":
            res.why = f"the host worker died without a word ({_launch_why(run, opts)})"
        else:
            res.why = _launch_why(run, opts)
    elif res.stage == "ranks" and not res.ok:
        stopped = run.outcome == "cancelled"
        res.why = "stopped: another host had failed" if stopped else _launch_why(run, opts)
        res.victim = stopped
    if res.why:
        res.why = clean(" ".join(res.why.split()), limit=WHY_LIMIT)
    return res


def _peer_failure(why: str) -> bool:
    """A rank error that says a *peer* went away (gloo/NCCL), not that this rank broke."""
    w = why.lower()
    return any(
        s in w
        for s in (
            "connection closed by peer",
            "connection reset",
            "broken pipe",
            "remote process exited",
            "failed to recv",
            "connection was likely closed",
            "timed out",
            "timeout",
        )
    )
