"""The job-wide verdict at one moment, from each node's latest `check --json` line (pure).

- the job is the `job_key` most alarmed nodes report (nodes of other jobs are left out);
- its spinning GPUs are `host:gpu` on every stalled node;
- its suspects are its GPUs, on any node, that do not spin: a stalled node's own suspects,
  and every GPU of the job on a node that reports "ok" (nothing spins there: its rank is
  idle on the CPU, busy elsewhere, or gone);
- `waiting_hosts` are stalled nodes whose GPUs all spin, `silent_hosts` the expected nodes
  that sent nothing, and `unseen_ranks` the job's ranks that no node reported;
- a busy node whose rank advances while the others wait for it makes the job busy, not hung;
  a rendezvous names the ranks missing on every node; a job that is only slow names its
  stragglers (gputui.diagnose.merge.slow);
- the reason leads with what says the most: a sick GPU, then the odd stack, then who spins.

gputui.diagnose.merge.join calls it once per step in time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace as _replace

from gputui.diagnose.merge.merged import Merged
from gputui.diagnose.merge.node_line import _RANK_LIST_LIMIT, NodeLine
from gputui.diagnose.merge.slow import slow_across
from gputui.diagnose.merge.stacks import _odd_ones, _stack_entries, odd_text, stack_groups
from gputui.diagnose.rank_lists import ranks_text
from gputui.diagnose.states import is_alarm
from gputui.diagnose.verdict import BUSY, HUNG, OK, SLOW, STALLED

_LOCAL_KEYS = ("node", "~", "pid:", "parent:")  # job keys that mean nothing on another node


def _hosts_text(hosts: list[str], limit: int = 6) -> str:
    shown = ", ".join(hosts[:limit])
    return shown + (f" and {len(hosts) - limit} more" if len(hosts) > limit else "")


def _is_local(key: str | None) -> bool:
    return key is None or key.startswith(_LOCAL_KEYS)


def judge(
    latest: dict[str, NodeLine], t: float, expect: Iterable[str] = (), silent: Iterable[str] = ()
) -> Merged:
    """The job-wide verdict from each node's latest line."""
    if busy := _busy_across(latest, t):
        return busy
    # A busy node that is not the whole answer (another node's rank is stuck): its GPUs
    # spin and wait like any stalled node's, and its busy rank is no suspect.
    latest = {
        h: _replace(ln, state=STALLED, suspects=(), suspect_pids=()) if ln.state == BUSY else ln
        for h, ln in latest.items()
    }
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
        from gputui.diagnose.hang.rendezvous import merged_reason

        return _replace(m, reason=merged_reason(m.job, m.missing_ranks, m.hosts, m.since, t))
    if state == OK and (slow := slow_across(latest.values())).stragglers:
        return _replace(
            m,
            state=SLOW,
            job=slow.job,
            reason=slow.reason(len(latest)),
            stragglers=slow.stragglers,
            straggler_ranks=slow.ranks,
            wait_share=slow.shares,
        )
    return _phrase(m, members, t)


def _busy_across(latest: dict[str, NodeLine], t: float) -> Merged | None:
    """A job whose nodes spin while one node's rank advances (it writes a checkpoint): busy,
    not a hang, when every stalled node of that job only waits (no suspect of its own) and
    none is hung past its own limit. None otherwise."""
    busy = sorted((ln for ln in latest.values() if ln.state == BUSY), key=lambda ln: ln.host)
    if not busy:
        return None
    key = busy[0].job_key
    same = [ln for ln in latest.values() if ln.job_key == key or _is_local(ln.job_key)]
    stuck = [ln for ln in same if is_alarm(ln.state)]
    if any(ln.suspects or ln.suspect_pids for ln in stuck):
        return None  # a rank that does not advance somewhere: that is the hang
    spinning = tuple(f"{ln.host}:{g}" for ln in [*busy, *stuck] for g in ln.spinning)
    who = f"job {key}: " if key and not _is_local(key) else ""
    text = "; ".join(f"{ln.host}: {ln.reason}" for ln in busy[:4])
    waits = sorted({ln.host for ln in stuck})
    wait = f"; {_hosts_text(waits)} wait for it" if waits else ""
    return Merged(
        t=t,
        state=BUSY,
        spinning=spinning,
        suspects=(),
        reason=f"{who}busy, not a hang, across {len(latest)} host(s): {text}{wait}",
        since=min((ln.since for ln in busy if ln.since is not None), default=None),
        job=key,
        waiting_hosts=tuple(waits),
        hosts=len(latest),
        findings=tuple(f"{ln.host}: {ln.reason}" for ln in busy),
        next_steps=(
            "Nothing to do while it advances; each node's `check` raises the alarm if it "
            "stops advancing, or after --busy-limit.",
        ),
    )


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


def _phrase(m: Merged, members: list[NodeLine], t: float) -> Merged:
    n = m.hosts
    if m.state == OK:
        reason = f"no hang on {n} host(s)"
        if m.sick:
            reason += f"; sick GPU: {'; '.join(m.sick[:4])}"
        if m.silent_hosts:
            reason += f"; silent: {_hosts_text(list(m.silent_hosts))}"
        return _replace(m, reason=reason)
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
    elif not (m.sick or m.odd):  # else a sick GPU or the stacks already say where it is
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
    return _replace(m, reason=text + ".", next_steps=tuple(steps))
