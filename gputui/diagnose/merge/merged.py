"""The job-wide verdict of `gputui merge`: its fields, and the JSON line `merge --json` prints.

gputui.diagnose.merge.judge makes one at a moment from each node's latest line,
gputui.diagnose.merge.join one per change over the span; the commands print them and the
blamed host's probe (gputui.diagnose.merge.host_probe) joins its answer to one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputui.diagnose.merge.host_blame import HostBlame


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
    blamed_host: HostBlame | None = None  # the host whose hardware it blames (host_blame.py)

    def key(self) -> tuple[Any, ...]:
        return (
            self.state,
            self.spinning,
            self.suspects,
            self.silent_hosts,
            self.sick,
            self.stragglers,
        )


def merged_to_json(m: Merged) -> dict[str, Any]:
    """Shaped like a `check --json` line (the first five keys), with the job-wide keys.

    Args:
        m: one merged verdict.

    Returns:
        The JSON object `merge --json` prints.
    """
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
    if m.blamed_host is not None:
        d["blamed_host"] = m.blamed_host.to_json()
    d["stragglers"] = list(m.stragglers)
    if m.stragglers:
        d["straggler_ranks"] = list(m.straggler_ranks)
        d["wait_share"] = {k: round(x, 3) for k, x in sorted(m.wait_share.items())}
    return d
