"""A slow job across nodes: the straggler named as host:gpu (rank) from each node's shares.

Every node's `check --json` line carries `wait_share` (GPU -> fraction of its busy samples in
the collective-wait pattern) and the job's global ranks on its GPUs. A node alone cannot
always tell: when the straggler is on another node, every local rank waits alike and the node
says so. Side by side, the shares of all nodes of the job go through the same rule as on one
node (gputui.diagnose.slow.straggler.split): the GPUs that wait much less than the rest, when they
are a minority, hold the job back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gputui.diagnose.slow.straggler import split
from gputui.diagnose.states import State

if TYPE_CHECKING:
    from gputui.diagnose.merge.node_line import NodeLine

_LOCAL_KEYS = ("node", "~", "pid:", "parent:")


@dataclass(frozen=True)
class SlowAcross:
    """The job's stragglers ("host:gpu"), their ranks, and every GPU's share."""

    job: str | None = None
    stragglers: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    shares: dict[str, float] = field(default_factory=dict)
    waiters: int = 0
    mean_wait: float = 0.0

    def reason(self, hosts: int) -> str:
        from gputui.diagnose.rank_lists import ranks_text

        who = f"job {self.job}: " if self.job else ""
        ranks = f" ({ranks_text(self.ranks)})" if self.ranks else ""
        return (
            f"{who}slow across {hosts} host(s): {', '.join(self.stragglers)}{ranks} "
            f"{'is the straggler' if len(self.stragglers) == 1 else 'are the stragglers'}; "
            f"{self.waiters} other GPU(s) wait for it in {self.mean_wait:.0%} of their samples."
        )


def slow_across(lines: Iterable[NodeLine]) -> SlowAcross:
    """The stragglers of the job most nodes report shares for (empty when none)."""
    with_shares = [ln for ln in lines if ln.wait_share and ln.state in (State.OK, State.SLOW)]
    keys = Counter(
        ln.job_key for ln in with_shares if ln.job_key and not ln.job_key.startswith(_LOCAL_KEYS)
    )
    if not keys:
        return SlowAcross()
    job = keys.most_common(1)[0][0]
    shares: dict[str, float] = {}
    ranks: dict[str, int] = {}
    for ln in with_shares:
        if ln.job_key != job:
            continue
        for g, x in ln.wait_share.items():
            where = f"{ln.host}:{g}"
            shares[where] = x
            if g in ln.ranks:
                ranks[where] = ln.ranks[g]
    if len(shares) < 2:
        return SlowAcross(job=job, shares=shares)
    low, high, _ = split(shares)
    if not low:
        return SlowAcross(job=job, shares=shares)
    return SlowAcross(
        job=job,
        stragglers=tuple(sorted(low)),
        ranks=tuple(sorted(ranks[w] for w in low if w in ranks)),
        shares=shares,
        waiters=len(high),
        mean_wait=sum(shares[w] for w in high) / len(high),
    )
