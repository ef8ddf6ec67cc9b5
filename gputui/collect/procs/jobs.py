"""Group GPU processes into distributed jobs and ranks.

The ranks of one job are found from each process's environment (the variables torchrun,
torch.distributed and Slurm set) and, failing that, from a shared torchrun parent. When
environments cannot be read, every process that holds a GPU is put in one node-wide group:
for hang detection a too-large group is safe, a missed group is not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gputui.collect.model import Job, ProcessInfo, RankInfo

RANK_ENV_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_ID",
)

_LAUNCHER_HINTS = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "deepspeed")


MAX_RANKS = 1 << 20
"""Largest rank or world size believed from an environment: the largest jobs run on about
100,000 GPUs. A process's environment is input like any other, and code downstream walks
ranks (the detector infers missing local ranks), so `LOCAL_WORLD_SIZE=1000000000000` must
read as "unknown", not as a loop of a trillion steps."""


def _int(v: str | None) -> int | None:
    """A rank variable: plain ASCII digits, 0..MAX_RANKS; anything else is unknown (None).

    int() alone would take " 5", "1_0" and digits of other scripts.
    """
    if v is None or not (v.isascii() and v.isdigit()) or len(v) > 8:
        return None
    n = int(v)
    return n if n <= MAX_RANKS else None


def rank_from_env(env: Mapping[str, str]) -> RankInfo | None:
    """RankInfo from an environment, or None when it has none of the rank variables.

    Args:
        env: a process's environment.

    Returns:
        Its RankInfo (ranks, world sizes, master address, run id), or None when it carries
        none of the rank variables.
    """
    if not any(k in env for k in RANK_ENV_VARS):
        return None
    master = None
    if env.get("MASTER_ADDR") or env.get("MASTER_PORT"):
        master = f"{env.get('MASTER_ADDR', '?')}:{env.get('MASTER_PORT', '?')}"
    return RankInfo(
        rank=_int(env.get("RANK")),
        local_rank=_int(env.get("LOCAL_RANK")),
        world_size=_int(env.get("WORLD_SIZE")),
        local_world_size=_int(env.get("LOCAL_WORLD_SIZE")),
        master=master,
        run_id=env.get("TORCHELASTIC_RUN_ID") or None,
        slurm_job_id=env.get("SLURM_JOB_ID") or None,
    )


def _is_launcher(cmd: str | None) -> bool:
    return bool(cmd) and any(h in cmd for h in _LAUNCHER_HINTS)  # type: ignore[operator]


def _job_key(p: ProcessInfo) -> tuple[str, str] | None:
    """(key, how) for a process whose job can be told, else None."""
    r = p.rank
    if r is not None and r.rank is not None:
        if r.run_id and r.run_id != "none":
            return f"torchelastic:{r.run_id}", f"TORCHELASTIC_RUN_ID={r.run_id}"
        if r.master:
            return f"master:{r.master}", f"MASTER_ADDR:PORT={r.master}"
        if r.slurm_job_id:
            return f"slurm:{r.slurm_job_id}", f"SLURM_JOB_ID={r.slurm_job_id}"
        if p.ppid is not None:
            return f"parent:{p.ppid}", f"RANK set, common parent pid {p.ppid}"
    if p.ppid is not None and _is_launcher(p.parent_cmd):
        return f"parent:{p.ppid}", f"children of launcher pid {p.ppid}"
    return None


def _rank_order(p: ProcessInfo) -> tuple[int, int]:
    r = p.rank.rank if p.rank and p.rank.rank is not None else 1 << 30
    return (r, p.pid)


def group_jobs(processes: Iterable[ProcessInfo]) -> tuple[Job, ...]:
    """Jobs of the GPU processes, largest first. Processes on no GPU are left out."""
    groups: dict[str, list[ProcessInfo]] = {}
    hows: dict[str, str] = {}
    unknown: list[ProcessInfo] = []
    for p in processes:
        if not p.gpus:
            continue
        found = _job_key(p)
        if found is None:
            if p.env_error is not None or p.rank is None and not p.cmdline:
                unknown.append(p)  # environment unreadable, or a bare pid from a recording
            else:
                groups.setdefault(f"pid:{p.pid}", []).append(p)
                hows[f"pid:{p.pid}"] = "single process, no rank variables"
            continue
        key, how = found
        groups.setdefault(key, []).append(p)
        hows[key] = how
    if unknown:
        # Unreadable environments: every GPU process on the node is one group (hangs still show).
        everyone = unknown + [p for ps in groups.values() for p in ps]
        groups = {"node": everyone}
        hows = {"node": "environments unreadable: all GPU processes on this node as one group"}
    jobs = []
    for key, ps in groups.items():
        ps = sorted(ps, key=_rank_order)
        worlds = {p.rank.world_size for p in ps if p.rank and p.rank.world_size}
        world = max(worlds) if worlds else None
        gpus = tuple(sorted({g for p in ps for g in p.gpus}))
        n = len(ps)
        label = key if key == "node" else key.split(":", 1)[1] if ":" in key else key
        if key.startswith("pid:"):
            label = f"pid {ps[0].pid}"
        label = f"{label} ({n} proc{'s' if n != 1 else ''}" + (
            f", world {world})" if world else ")"
        )
        jobs.append(
            Job(
                key=key,
                label=label,
                pids=tuple(p.pid for p in ps),
                gpus=gpus,
                world_size=world,
                how=hows[key],
            )
        )
    jobs.sort(key=lambda j: (-len(j.pids), j.key))
    return tuple(jobs)


def rank_of(job: Job, pid: int, processes: Iterable[ProcessInfo]) -> int | None:
    """The rank number a process holds in its job, or None when unknown."""
    for p in processes:
        if p.pid == pid and p.rank is not None:
            return p.rank.rank
    return None
