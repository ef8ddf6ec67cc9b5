"""One node's `check --json` line, read for `gputui merge` (untrusted: bounded, typed).

Every key a node's line may carry is read here and only here: its verdict, its job and ranks,
its stacks, its GPU health (`sick`), a rendezvous's `missing_ranks` and a slow job's wait
shares. A line of any other shape is a ValueError, never a crash; gputui.diagnose.merge.join then
judges the lines of all nodes together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gputui.collect.trace.record_spec import Anything, Int, List, Map, Num, Obj, Str
from gputui.diagnose.verdict import BUSY, HUNG, OK, SLOW, STALLED

_RANK_LIST_LIMIT = 1 << 20
_INDEX = Int(0, 1 << 22)  # a GPU index or a pid
_INDICES = List(_INDEX, 4096)
_STACK_ENTRY = Obj(
    {
        "pid": _INDEX,
        "rank": Int(0, 1 << 24),
        "gpu": _INDEX,
        "role": Str(64),
        "outcome": Str(64),
        "frame": Str(4096),
        "collective": Str(256),
        "stack": List(Str(4096), 256),
        "error": Str(4096),
        "host": Str(255),
    }
)
CHECK_LINE = Obj(
    {
        "t": Num(-1e11, 1e11),
        "state": Str(16, choices=(OK, STALLED, HUNG, SLOW, BUSY)),
        "host": Str(255),
        "spinning": _INDICES,
        "suspects": _INDICES,
        "suspect_pids": _INDICES,
        "since": Num(-1e11, 1e11),
        "reason": Str(64 * 1024),
        "job_key": Str(4096),
        "world_size": Int(0, _RANK_LIST_LIMIT),
        "ranks": Map(Int(0, 1 << 31), 4096, keys=r"\d{1,7}"),
        "stacks": List(_STACK_ENTRY, 4096),
        "culprit_frame": Str(4096),
        "findings": List(Str(64 * 1024), 1024),
        # each GPU's entry is read leniently (_sick): a malformed one is left out, not the line
        "health": Obj({"gpus": Map(Anything(), 256)}),
        "missing_ranks": List(Int(0, 1 << 31), 4096),
        "stragglers": _INDICES,
        "wait_share": Map(Num(0.0, 1.0), 4096, keys=r"\d{1,7}"),
    },
    required=("t", "state"),
)
"""The keys of a `check --json` line that merge reads, and their shapes: a line with one of
the wrong shape is skipped with its reason (`findings: a number, expected a list`), never a
crash (gputui.collect.trace.record_spec). Other keys are not read."""


@dataclass(frozen=True)
class NodeLine:
    """One node's verdict at one time, as `check --json` printed it."""

    host: str
    t: float
    state: str
    spinning: tuple[int, ...] = ()
    suspects: tuple[int, ...] = ()
    suspect_pids: tuple[int, ...] = ()
    since: float | None = None
    reason: str = ""
    job_key: str | None = None
    world_size: int | None = None
    ranks: dict[int, int] = field(default_factory=dict)  # GPU -> global rank
    stacks: tuple[dict[str, Any], ...] = ()
    culprit_frame: str | None = None
    findings: tuple[str, ...] = ()
    sick: dict[int, str] = field(default_factory=dict)  # GPU -> "failed: why" (its health)
    missing_ranks: tuple[int, ...] | None = None  # a rendezvous: ranks never seen here
    # A slow job (gputui.diagnose.merge.slow): its local stragglers and every GPU's wait
    # share. `state` stays ok for a slow line: slow is judged across nodes.
    stragglers: tuple[int, ...] = ()
    wait_share: dict[int, float] = field(default_factory=dict)


def _sick(health: Any) -> dict[int, str]:
    """GPUs that are not ok in a line's `health` (gputui.diagnose.health.judge); {} if none."""
    gpus = health.get("gpus") if isinstance(health, dict) else None
    out: dict[int, str] = {}
    for g, h in list(gpus.items())[:256] if isinstance(gpus, dict) else []:
        if str(g).isdigit() and isinstance(h, dict) and h.get("health") in ("failed", "degraded"):
            out[int(g)] = f"{h['health']}: {str(h.get('reason') or '')[:200]}"
    return out


def _ints(v: Any, what: str) -> tuple[int, ...]:
    if v is None:
        return ()
    if not isinstance(v, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) for x in v
    ):
        raise ValueError(f"'{what}' must be a list of GPU indices")
    return tuple(v)


def line_from_json(d: Any, default_host: str) -> NodeLine:
    """A NodeLine from a parsed `check --json` object. ValueError (one line) if it is not.

    Args:
        d: one parsed `check --json` line (possibly from an untrusted file).
        default_host: the host when the line names none (the file's name: host_from_name).

    Returns:
        The NodeLine: host, time, state and what the merge reads of the verdict.

    Raises:
        ValueError: not a `check --json` line (one line saying why).
    """
    if not isinstance(d, dict):
        raise ValueError("not a JSON object")
    why = CHECK_LINE.problem(d)
    if why is not None:
        raise ValueError(why)
    t, state = d.get("t"), d.get("state")
    if not isinstance(t, (int, float)) or isinstance(t, bool) or t != t or abs(t) > 1e11:
        raise ValueError("missing or bad 't'")
    if state not in (OK, STALLED, HUNG, SLOW, BUSY):
        raise ValueError("'state' must be ok, slow, busy, stalled or hung")
    host = d.get("host") or default_host
    if not isinstance(host, str) or len(host) > 255:
        raise ValueError("'host' must be a short string")
    ranks_in = d.get("ranks") or {}
    if not isinstance(ranks_in, dict):
        raise ValueError("'ranks' must map GPU to rank")
    ranks = {}
    for g, r in ranks_in.items():
        if not str(g).isdigit() or not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise ValueError("'ranks' must map GPU indices to ranks")
        ranks[int(g)] = r
    stacks = d.get("stacks") or []
    if not isinstance(stacks, list):
        raise ValueError("'stacks' must be a list")
    since, world, key = d.get("since"), d.get("world_size"), d.get("job_key")
    return NodeLine(
        host=host,
        t=float(t),
        state=OK if state == SLOW else state,  # slow is judged across nodes (merge_slow)
        spinning=_ints(d.get("spinning"), "spinning"),
        suspects=_ints(d.get("suspects"), "suspects"),
        suspect_pids=_ints(d.get("suspect_pids"), "suspect_pids"),
        since=float(since)
        if isinstance(since, (int, float)) and not isinstance(since, bool)
        else None,
        reason=str(d.get("reason") or "")[:2000],
        job_key=key if isinstance(key, str) else None,
        world_size=world if isinstance(world, int) and not isinstance(world, bool) else None,
        ranks=ranks,
        stacks=tuple(s for s in stacks[:4096] if isinstance(s, dict)),
        culprit_frame=d["culprit_frame"] if isinstance(d.get("culprit_frame"), str) else None,
        findings=tuple(str(f)[:500] for f in d.get("findings") or [] if isinstance(f, str)),
        sick=_sick(d.get("health")),
        missing_ranks=_missing(d.get("missing_ranks")),
        **slow_keys(d, _ints),
    )


def _missing(v: Any) -> tuple[int, ...] | None:
    """A rendezvous line's `missing_ranks` (bounded); None when the line has none."""
    if not isinstance(v, list):
        return None
    return tuple(x for x in v[:4096] if isinstance(x, int) and not isinstance(x, bool))


def slow_keys(d: dict[str, Any], ints: Callable[[Any, str], tuple[int, ...]]) -> dict[str, Any]:
    """A `check --json` line's slow keys, checked: `stragglers` (GPU indices) and
    `wait_share` (GPU -> 0..1). ValueError (one line) when they are malformed."""
    shares_in = d.get("wait_share") or {}
    if not isinstance(shares_in, dict):
        raise ValueError("'wait_share' must map GPU to a share")
    shares = {}
    for g, x in list(shares_in.items())[:4096]:
        ok = isinstance(x, (int, float)) and not isinstance(x, bool) and 0.0 <= x <= 1.0
        if not str(g).isdigit() or not ok:
            raise ValueError("'wait_share' must map GPU indices to shares between 0 and 1")
        shares[int(g)] = float(x)
    return {"stragglers": ints(d.get("stragglers"), "stragglers"), "wait_share": shares}
