"""Never came: a job whose ranks wait in the rendezvous for a rank that is not there.

The ranks of such a job sit in `init_process_group` (the TCPStore barrier) or torchrun's
rendezvous with no GPU spinning, so the NVML detector sees nothing. Found among the host's
processes by their environment (gputui.collect.procs.hostranks), a job becomes a rendezvous hang
once its ranks have waited more than WAIT_S (or were already there when gputui started) and
one rank's stack confirms it is in the rendezvous. It is named from the environment and the
sockets: which ranks are here, which of the world were never seen on this node
(`missing_ranks`; across nodes `gputui merge` joins them), and whether MASTER_ADDR:PORT is
listening and by whom (the TCPStore in rank 0, or a process of someone else on that port).

Live, the judgement is a `{"type": "rendezvous"}` record (recorded by `gputui record`); the
verdict is made from the record alone, so a replay says the same. Pure: the stacks and the
sockets are looked at by gputui.tools.gather.rendezvous, which the Watcher runs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gputui.collect.procs.hostranks import HostRank, describe
from gputui.diagnose.ranking import Finding, Strength
from gputui.diagnose.verdict import HUNG, STALLED, Verdict
from gputui.textsafe import clean

KIND = "rendezvous"
WAIT_S = 10.0
MAX_MISSING = 1024  # missing ranks listed; the count says the rest


def job_key(r: HostRank) -> str | None:
    if r.rank.run_id and r.rank.run_id != "none":
        return f"torchelastic:{r.rank.run_id}"
    if r.rank.master:
        return f"master:{r.rank.master}"
    return None


def candidates(
    ranks: list[HostRank], now: float, started: float, wait_s: float = WAIT_S
) -> dict[str, list[HostRank]]:
    """Jobs of host ranks that have waited long enough to be judged (pure)."""
    jobs: dict[str, list[HostRank]] = {}
    pids = {r.pid for r in ranks}
    parents = {r.ppid for r in ranks}
    for r in ranks:
        if r.ppid in pids and r.nnodes is None:
            continue  # a rank's child (a data loader worker) inherits its rank variables
        if r.nnodes is not None:
            if r.pid in parents or r.nnodes.split(":")[0] in ("", "1"):
                continue  # a torchrun agent with workers (past its rendezvous), or one node
            jobs[f"torchrun:{r.rank.master}"] = [r]
            continue
        key = job_key(r)
        if key is not None:
            jobs.setdefault(key, []).append(r)
    out = {}
    for key, rs in jobs.items():
        first = min(r.create_time for r in rs)
        if first < started or now - first >= wait_s:
            out[key] = sorted(rs, key=lambda r: (r.rank.rank or 0, r.pid))
    return out


def missing(world: int, here: set[int]) -> tuple[list[int], int]:
    """(the first MAX_MISSING ranks of the world not here, how many are missing)."""
    miss: list[int] = []
    count = 0
    for r in range(world):
        if r not in here:
            count += 1
            if len(miss) < MAX_MISSING:
                miss.append(r)
    return miss, count


def membership(key: str, rs: list[HostRank]) -> dict[str, Any]:
    """Who is here and who is missing, from the ranks seen now (pure, cheap: redone at
    every sample, so a rank that appears after the stack was taken is counted)."""
    world = max((r.rank.world_size or 0) for r in rs)
    miss, count = missing(world, {r.rank.rank for r in rs if r.rank.rank is not None})
    return {
        "job": key,
        "world": world,
        "here": [describe(r) for r in rs],
        "missing_ranks": miss,
        "missing_count": count,
        "since": round(min(r.create_time for r in rs), 3),
    }


# ---------------------------------------------------------------- words (pure)


def _ranks(rs: list[int]) -> str:
    return ("rank " if len(rs) == 1 else "ranks ") + ",".join(map(str, rs))


def _listen_words(j: dict[str, Any]) -> str:
    addr, port = j.get("master_addr") or "?", j.get("master_port")
    where = f"{addr}:{port}"
    if port is None:
        return "MASTER_PORT is not set"
    here = {h.get("pid"): h.get("rank") for h in j.get("here") or () if isinstance(h, dict)}
    ls = [x for x in j.get("listeners") or () if isinstance(x, list) and len(x) == 3]
    ours = [x for x in ls if x[0] in here]
    if ours:
        pid = ours[0][0]
        if here[pid] is None:
            return f"{where} is listening (the rendezvous store, in torchrun pid {pid})"
        return f"{where} is listening (the TCPStore, in rank {here[pid]} pid {pid})"
    if ls:
        pid, _addr, name = ls[0]
        who = f"pid {pid} ({name})" if pid is not None else "a process gputui cannot see"
        return f"{where} is taken by {who}, not by this job: the ranks may be talking to it"
    if j.get("master_local"):
        return f"nobody listens on {where}: the rank that hosts the TCPStore (rank 0) is not up"
    return f"the master {where} is on another node"


def sentences(j: dict[str, Any], now: float) -> tuple[str, str]:
    """(the reason, the finding) for one job of a rendezvous record."""
    here = sorted(h["rank"] for h in j.get("here") or () if isinstance(h.get("rank"), int))
    world = j.get("world") or 0
    since = j.get("since")
    waited = f" for {max(0.0, now - since):.0f} s" if isinstance(since, (int, float)) else ""
    miss = [m for m in j.get("missing_ranks") or () if isinstance(m, int)]
    n = j.get("missing_count")
    count = n if isinstance(n, int) else len(miss)
    gone = "no rank is missing on this node"
    if miss:
        more = f" and {count - len(miss)} more" if count > len(miss) else ""
        gone = f"{_ranks(miss[:16])}{more if len(miss) <= 16 else ' (and more)'} never came"
        gone += " (not seen on this node)"
    agent = j.get("agent") if isinstance(j.get("agent"), dict) else None
    if agent is not None:
        nodes = f"--nnodes {agent.get('nnodes')}"
        who = f"torchrun (pid {agent.get('pid')})"
        reason = (
            f"job {j.get('job')}: rendezvous hang: {who} has waited{waited} in its rendezvous "
            f"for the other nodes ({nodes}); no rank has started; {_listen_words(j)}"
        )
        finding = f"rendezvous: {who} waits for the other nodes ({nodes}); no rank has started"
        return clean(reason, limit=600), clean(finding, limit=300)
    where = "the rendezvous (init_process_group)"
    reason = (
        f"job {j.get('job')}: rendezvous hang: {_ranks(here)} of world {world} have waited"
        f"{waited} in {where}; {gone}; {_listen_words(j)}"
    )
    # No seconds in the finding: check --json prints a line when the findings change.
    finding = f"rendezvous: {gone}; {_ranks(here)} wait in {where}"
    return clean(reason, limit=600), clean(finding, limit=300)


NEXT_STEPS = (
    "Start the missing rank(s), or find why they did not start (their launcher's output, "
    "the scheduler's log).",
    "Every rank needs the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE; a port taken by "
    "another process (an earlier run) makes ranks join the wrong store.",
    "Across nodes, `gputui merge` of every node's `check --json` names the ranks missing "
    "everywhere.",
)


def verdict_from_record(rec: dict[str, Any], t: float, hang_after: float) -> Verdict | None:
    """The verdict a rendezvous record says (None when it names no job)."""
    jobs = [j for j in rec.get("jobs") or () if isinstance(j, dict)]
    if not jobs:
        return None
    j = jobs[0]
    reason, text = sentences(j, t)
    since = j.get("since") if isinstance(j.get("since"), (int, float)) else None
    state = HUNG if since is not None and t - since >= hang_after else STALLED
    miss = [m for m in j.get("missing_ranks") or () if isinstance(m, int)]
    pids = tuple(h["pid"] for h in j.get("here") or () if isinstance(h.get("pid"), int))
    f = Finding(text, Strength.RANK_GONE, KIND, ranks=tuple(miss[:64]), pids=pids)
    extra = {"jobs": jobs, "missing_ranks": miss}
    return Verdict(
        t=t,
        state=state,
        reason=reason,
        next_steps=NEXT_STEPS,
        since=since,
        job=str(j.get("job")),
        findings=(f.text,),
        ranked=(f,),
        evidence={KIND: extra, "missing_ranks": miss},
    )


def merged_reason(
    job: str | None, miss: tuple[int, ...], hosts: int, since: float | None, t: float
) -> str:
    """`gputui merge`'s reason for a rendezvous seen on several nodes."""
    who = f"job {job}: " if job else ""
    secs = f" for {t - since:.0f} s" if since is not None else ""
    if miss:
        gone = f"{_ranks(list(miss[:16]))}{' (and more)' if len(miss) > 16 else ''} never came"
        gone += f" (seen on none of {hosts} host(s))"
    else:
        gone = f"every rank of the world is on one of the {hosts} host(s): check that they "
        gone += "share MASTER_ADDR, MASTER_PORT and WORLD_SIZE"
    return f"{who}rendezvous hang across {hosts} host(s){secs}: {gone}."


def with_rendezvous(v: Verdict, rv: Verdict) -> Verdict:
    """The NVML verdict is ok: the rendezvous verdict stands, with NVML's words after."""
    return replace(rv, gpu_states=v.gpu_states, power_known=v.power_known)
