"""Many nodes' `check --json` lines -> one job-wide verdict (pure: no I/O, no clocks).

On the node a person logged in to, every local GPU of a multi-node job often spins, and the
culprit is elsewhere. Each node's `gputui check --json` says what it sees; this module puts
the lines of all nodes side by side in time and judges the job as a whole:

- the job is the `job_key` most alarmed nodes report (nodes of other jobs are left out);
- its spinning GPUs are `host:gpu` on every stalled node;
- its suspects are its GPUs, on any node, that do not spin: a stalled node's own suspects,
  and every GPU of the job on a node that reports "ok" (nothing spins there: its rank is
  idle on the CPU, busy elsewhere, or gone);
- `waiting_hosts` are stalled nodes whose GPUs all spin, `silent_hosts` the expected nodes
  that sent nothing, and `unseen_ranks` the job's ranks that no node reported;
- stack dumps (issue 9's `stacks` entries) are grouped across nodes STAT-style, so the rank
  that is elsewhere stands out: `ranks 0-61,63 on 16 hosts in all_reduce (train.py:44)`
  against `rank 62 on node-17 in load_batch (data.py:88)`.

Lines are aligned in time by coalescing: nodes see one stall at slightly different moments,
so changes that come within `window` seconds of each other make one merged step. The work is
O(lines + hosts x GPUs per step) and the number of steps is the number of distinct moments
of change, not the number of lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gputui.diagnose.merge_slow import slow_across, slow_keys
from gputui.diagnose.verdict import HUNG, OK, SLOW, STALLED

WINDOW_S = 2.0
_LOCAL_KEYS = ("node", "~", "pid:", "parent:")  # job keys that mean nothing on another node
_RANK_LIST_LIMIT = 1 << 20
MAX_STACKS = 256  # odd ranks' stack entries carried in a merged line


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
    # A slow job (gputui.diagnose.merge_slow): its local stragglers and every GPU's wait
    # share. `state` stays ok for a slow line: slow is judged across nodes.
    stragglers: tuple[int, ...] = ()
    wait_share: dict[int, float] = field(default_factory=dict)


def _sick(health: Any) -> dict[int, str]:
    """GPUs that are not ok in a line's `health` (gputui.diagnose.health); {} if none."""
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
    """A NodeLine from a parsed `check --json` object. ValueError (one line) if it is not."""
    if not isinstance(d, dict):
        raise ValueError("not a JSON object")
    t, state = d.get("t"), d.get("state")
    if not isinstance(t, (int, float)) or isinstance(t, bool) or t != t or abs(t) > 1e11:
        raise ValueError("missing or bad 't'")
    if state not in (OK, STALLED, HUNG, SLOW):
        raise ValueError("'state' must be ok, slow, stalled or hung")
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


# ---------------------------------------------------------------- the job-wide verdict


@dataclass(frozen=True)
class Merged:
    """The job-wide verdict at time `t`."""

    t: float
    state: str
    spinning: tuple[str, ...]  # "host:gpu"
    suspects: tuple[str, ...]
    reason: str
    suspect_pids: tuple[str, ...] = ()  # "host:pid"
    since: float | None = None
    job: str | None = None
    next_steps: tuple[str, ...] = ()
    suspect_ranks: tuple[int, ...] = ()
    waiting_hosts: tuple[str, ...] = ()
    silent_hosts: tuple[str, ...] = ()
    hosts: int = 0
    unseen_ranks: tuple[int, ...] = ()
    stack_groups: tuple[str, ...] = ()
    stacks: tuple[dict[str, Any], ...] = ()  # the odd ranks' entries (see _odd_ones)
    findings: tuple[str, ...] = ()
    sick: tuple[str, ...] = ()  # "host:gpu (rank R) failed: why": a node's sick GPU
    missing_ranks: tuple[int, ...] | None = None  # a rendezvous: missing on every node
    stragglers: tuple[str, ...] = ()  # "host:gpu" of a slow job (state "slow")
    straggler_ranks: tuple[int, ...] = ()
    wait_share: dict[str, float] = field(default_factory=dict)  # "host:gpu" -> share
    odd: str = ""  # "b:3 (rank 3) in load (d.py:9), while ranks 0,2 are in all_reduce (...)"

    def key(self) -> tuple[Any, ...]:
        return (
            self.state,
            self.spinning,
            self.suspects,
            self.silent_hosts,
            self.sick,
            self.stragglers,
        )


def ranks_text(ranks: Iterable[int]) -> str:
    """'rank 62' or 'ranks 0-61,63': runs collapsed."""
    rs = sorted(set(ranks))
    runs, i = [], 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        runs.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ("rank " if len(rs) == 1 else "ranks ") + ",".join(runs)


def _hosts_text(hosts: list[str], limit: int = 6) -> str:
    shown = ", ".join(hosts[:limit])
    return shown + (f" and {len(hosts) - limit} more" if len(hosts) > limit else "")


def _is_local(key: str | None) -> bool:
    return key is None or key.startswith(_LOCAL_KEYS)


def _where(entry: dict[str, Any]) -> str:
    """Where a rank's stack is: 'all_reduce (train.py:44)', its frame, or its outcome."""
    frame, coll = entry.get("frame"), entry.get("collective")
    if coll and isinstance(frame, str) and "(" in frame:
        return f"{coll} ({frame.rsplit('(', 1)[1]}"
    if isinstance(frame, str) and frame:
        return frame
    outcome = entry.get("outcome")
    return "an exited process" if outcome == "gone" else f"no stack ({outcome or 'unknown'})"


def _odd_ones(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stack entries outside the largest group: the ranks that are elsewhere.

    With thousands of ranks the largest group is one sentence in `stack_groups`; repeating
    every waiting rank's stack in every merged line would only bury the odd ones.
    """
    if not entries:
        return []
    counts = Counter(_where(e) for e in entries)
    if len(counts) == 1:
        return entries if len(entries) <= 16 else []
    majority = counts.most_common(1)[0][0]
    return [e for e in entries if _where(e) != majority][:MAX_STACKS]


def stack_groups(entries: list[dict[str, Any]]) -> list[str]:
    """STAT-style: ranks grouped by where they are, the largest group first."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        groups.setdefault(_where(e), []).append(e)
    out = []
    for where, es in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ranks = [e["rank"] for e in es if isinstance(e.get("rank"), int)]
        hosts = sorted({str(e.get("host")) for e in es if e.get("host")})
        who = ranks_text(ranks) if ranks else f"{len(es)} process(es)"
        on = f" on {hosts[0]}" if len(hosts) == 1 else f" on {len(hosts)} hosts" if hosts else ""
        out.append(f"{who}{on} in {where}")
    return out


def _stack_entries(members: list[NodeLine]) -> list[dict[str, Any]]:
    """Every alarmed node's stack entries, each named for the host its rank runs on.

    A node watched through `--gpus` still carries the job's recorded stacks of every local
    rank, the other GPUs' too: rank 1's entry from host a is rank 1 on b when b's GPUs hold
    rank 1 (the text says `b:1`; the groups said "rank 1 on a"). One entry per rank."""
    where = {r: ln.host for ln in members for r in ln.ranks.values()}
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, Any]] = set()
    for ln in members:
        if ln.state == OK:
            continue
        for e in ln.stacks:
            rank = e.get("rank")
            host = where.get(rank, ln.host) if isinstance(rank, int) else ln.host
            key = (host, rank if isinstance(rank, int) else ("pid", e.get("pid")))
            if key not in seen:
                seen.add(key)
                out.append({**e, "host": host})
    return out


def judge(
    latest: dict[str, NodeLine], t: float, expect: Iterable[str] = (), silent: Iterable[str] = ()
) -> Merged:
    """The job-wide verdict from each node's latest line."""
    silent_hosts = sorted(({h for h in expect if h not in latest} | set(silent)) - set(latest))
    alarmed = [ln for ln in latest.values() if ln.state != OK]
    keys = Counter(ln.job_key for ln in alarmed if not _is_local(ln.job_key))
    key = keys.most_common(1)[0][0] if keys else None
    state = HUNG if any(ln.state == HUNG for ln in alarmed) else STALLED if alarmed else OK

    def in_job(ln: NodeLine) -> bool:
        return ln.job_key == key or (_is_local(ln.job_key) and (ln.state != OK or key is None))

    members = sorted((ln for ln in latest.values() if in_job(ln)), key=lambda ln: ln.host)
    spinning, suspects, pids, waiting = [], [], [], []
    suspect_ranks: set[int] = set()
    seen_ranks: set[int] = set()
    world = next((ln.world_size for ln in members if ln.world_size), None)
    for ln in members:
        seen_ranks.update(ln.ranks.values())
        if ln.state != OK:
            spinning += [f"{ln.host}:{g}" for g in ln.spinning]
            odd = ln.suspects
            if not odd:
                waiting.append(ln.host)
            pids += [f"{ln.host}:{p}" for p in ln.suspect_pids]
        elif alarmed:
            odd = tuple(sorted(ln.ranks))  # the job's GPUs here do not spin at all
        else:
            odd = ()
        suspects += [f"{ln.host}:{g}" for g in odd]
        suspect_ranks.update(ln.ranks[g] for g in odd if g in ln.ranks)
    unseen: tuple[int, ...] = ()
    if alarmed and world and world <= _RANK_LIST_LIMIT and seen_ranks:
        unseen = tuple(r for r in range(world) if r not in seen_ranks)
    entries = _stack_entries(members)
    groups = stack_groups(entries) if entries else []
    odd_words = odd_text(entries)
    entries = _odd_ones(entries)
    since = min((ln.since for ln in members if ln.since is not None), default=None)
    m = Merged(
        t=t,
        state=state,
        spinning=tuple(spinning),
        suspects=tuple(suspects),
        reason="",
        suspect_pids=tuple(pids),
        since=since,
        job=key,
        suspect_ranks=tuple(sorted(suspect_ranks)),
        waiting_hosts=tuple(waiting),
        silent_hosts=tuple(silent_hosts),
        hosts=len(latest),
        unseen_ranks=unseen,
        stack_groups=tuple(groups),
        stacks=tuple(entries),
        # Each node's findings under its name: a gone rank's last words per node:rank.
        findings=tuple(f"{ln.host}: {f}" for ln in members if ln.state != OK for f in ln.findings),
        sick=_sick_gpus(members if alarmed else sorted(latest.values(), key=lambda x: x.host)),
        missing_ranks=_missing_everywhere(members),
        odd=odd_words,
    )
    if m.missing_ranks is not None:
        from dataclasses import replace

        from gputui.diagnose.rendezvous import merged_reason

        return replace(m, reason=merged_reason(m.job, m.missing_ranks, m.hosts, m.since, t))
    if state == OK and (slow := slow_across(latest.values())).stragglers:
        from dataclasses import replace

        return replace(
            m,
            state=SLOW,
            job=slow.job,
            reason=slow.reason(len(latest)),
            stragglers=slow.stragglers,
            straggler_ranks=slow.ranks,
            wait_share=slow.shares,
        )
    return _phrase(m, members, t)


def _sick_gpus(lines: list[NodeLine]) -> tuple[str, ...]:
    """Each node's sick GPUs, the job's (a GPU with a rank) first: a failed GPU is the
    job-wide verdict's first words."""
    mine: list[str] = []
    other: list[str] = []
    for ln in lines:
        for g, why in sorted(ln.sick.items()):
            rank = ln.ranks.get(g)
            who = f"{ln.host}:{g}" + (f" (rank {rank})" if rank is not None else "")
            (mine if rank is not None else other).append(f"{who} {why}")
    return tuple(mine + other)


def _missing_everywhere(members: list[NodeLine]) -> tuple[int, ...] | None:
    """The ranks no node has seen, where nodes report a rendezvous (each lists the ranks of
    the world it has not seen): the intersection of their lists."""
    lists = [set(ln.missing_ranks) for ln in members if ln.missing_ranks is not None]
    if not lists:
        return None
    return tuple(sorted(set.intersection(*lists)))


def odd_text(entries: list[dict[str, Any]], limit: int = 4) -> str:
    """The ranks outside the largest stack group, each as host:rank, against that group:
    the strongest thing the stacks of many nodes say, so it leads the merged reason."""
    if len(entries) < 2:
        return ""
    counts = Counter(_where(e) for e in entries)
    if len(counts) < 2:
        return ""
    majority = counts.most_common(1)[0][0]
    odd = [e for e in entries if _where(e) != majority]
    if len(odd) * 2 >= len(entries):
        return ""  # no clear majority: the stack groups say it better
    named = [
        f"{e.get('host')}:{e['rank'] if isinstance(e.get('rank'), int) else '?'} in {_where(e)}"
        for e in odd[:limit]
    ]
    more = f" and {len(odd) - limit} more" if len(odd) > limit else ""
    rest = [e["rank"] for e in entries if _where(e) == majority and isinstance(e.get("rank"), int)]
    others = ranks_text(rest) if rest else f"{counts[majority]} rank(s)"
    return f"odd one out: {', '.join(named)}{more}, while {others} are in {majority}"


def _phrase(m: Merged, members: list[NodeLine], t: float) -> Merged:
    from dataclasses import replace

    n = m.hosts
    if m.state == OK:
        reason = f"no hang on {n} host(s)"
        if m.sick:
            reason += f"; sick GPU: {'; '.join(m.sick[:4])}"
        if m.silent_hosts:
            reason += f"; silent: {_hosts_text(list(m.silent_hosts))}"
        return replace(m, reason=reason)
    spin_hosts = sorted({s.rsplit(":", 1)[0] for s in m.spinning})
    who = f"job {m.job}: " if m.job else ""
    verb = "HUNG" if m.state == HUNG else "stalled"
    secs = f" for {t - m.since:.0f} s" if m.since is not None else ""
    text = (
        f"{who}{verb} across {n} host(s): {len(m.spinning)} GPU(s) on {len(spin_hosts)} "
        f"host(s) spin in a collective{secs}"
    )
    if m.odd:  # the stacks' answer leads: it says where, NVML only who spins
        text = f"{who}{m.odd}; {text[len(who) :]}"
    if m.sick:  # the hardware first: a failed GPU under a rank explains the whole job
        text = f"{who}GPU {m.sick[0]}; {text[len(who) :]}"
    if m.suspects:
        ranks = f" ({ranks_text(m.suspect_ranks)})" if m.suspect_ranks else ""
        text += f"; not spinning: {_hosts_text(list(m.suspects))}{ranks}"
    else:
        text += "; every GPU that answered spins: the culprit is on a host that did not answer"
    if m.silent_hosts:
        text += f"; silent: {_hosts_text(list(m.silent_hosts))}"
    if m.unseen_ranks:
        text += f"; {ranks_text(m.unseen_ranks)} reported by no host"
    steps = []
    if m.suspects:
        host, gpu = m.suspects[0].rsplit(":", 1)
        pid = next((p.rsplit(":", 1)[1] for p in m.suspect_pids if p.startswith(host + ":")), None)
        if pid:
            steps.append(f"On {host}: `gputui dump {pid}` shows where the suspect rank is.")
        else:
            steps.append(
                f"On {host}: `gputui` (or `gputui dump PID` of GPU {gpu}'s process) shows "
                "where the suspect rank is."
            )
    if m.silent_hosts:
        steps.append(
            "The silent hosts may hold the missing rank: reach them (ssh, the scheduler's "
            "node state) before anything else."
        )
    steps.append(
        "NCCL RAS on any node (`echo verbose status | nc localhost 28028`) lists the ranks "
        "whose collective count stays behind, with host and pid."
    )
    return replace(m, reason=text + ".", next_steps=tuple(steps))


# ---------------------------------------------------------------- in time


def merge(
    lines: Iterable[NodeLine],
    expect: Iterable[str] = (),
    silent: Iterable[str] = (),
    window: float = WINDOW_S,
) -> list[Merged]:
    """The merged verdict at each step where it changed, oldest first (at least one)."""
    ordered = sorted(lines, key=lambda ln: ln.t)
    expect, silent = tuple(expect), tuple(silent)
    latest: dict[str, NodeLine] = {}
    out: list[Merged] = []
    i = 0
    while i < len(ordered):
        j = i  # a step: lines each within `window` of the previous one
        while j + 1 < len(ordered) and ordered[j + 1].t - ordered[j].t <= window:
            j += 1
        for ln in ordered[i : j + 1]:
            latest[ln.host] = ln
        m = judge(latest, ordered[j].t, expect, silent)
        if not out or m.key() != out[-1].key() or m.stack_groups != out[-1].stack_groups:
            out.append(m)
        i = j + 1
    if not out:
        out.append(judge({}, 0.0, expect, silent))
    return out


def merged_to_json(m: Merged) -> dict[str, Any]:
    """Shaped like a `check --json` line (the first five keys), with the job-wide keys."""
    d: dict[str, Any] = {
        "t": round(m.t, 3),
        "state": m.state,
        "spinning": list(m.spinning),
        "suspects": list(m.suspects),
        "reason": m.reason,
        "suspect_pids": list(m.suspect_pids),
        "since": None if m.since is None else round(m.since, 3),
        "job": m.job,
        "next_steps": list(m.next_steps),
        "suspect_ranks": list(m.suspect_ranks),
        "waiting_hosts": list(m.waiting_hosts),
        "silent_hosts": list(m.silent_hosts),
        "hosts": m.hosts,
        "unseen_ranks": list(m.unseen_ranks),
    }
    if m.stack_groups:
        d["stack_groups"] = list(m.stack_groups)
    if m.odd:
        d["odd"] = m.odd
        d["stacks"] = list(m.stacks)
    if m.findings:
        d["findings"] = list(m.findings)
    if m.sick:
        d["sick_gpus"] = list(m.sick)
    if m.missing_ranks is not None:
        d["missing_ranks"] = list(m.missing_ranks)
    d["stragglers"] = list(m.stragglers)
    if m.stragglers:
        d["straggler_ranks"] = list(m.straggler_ranks)
        d["wait_share"] = {k: round(x, 3) for k, x in sorted(m.wait_share.items())}
    return d
