"""Stack dumps across nodes, STAT-style: ranks grouped by where they stand, the odd ones named.

With thousands of ranks the largest group is one sentence, and the ranks outside it (the
ones the others wait for) are what a person needs: `ranks 0-61,63 on 16 hosts in all_reduce
(train.py:44)` against `rank 62 on node-17 in load_batch (data.py:88)`.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from gputui.diagnose.rank_lists import ranks_text
from gputui.diagnose.verdict import OK

if TYPE_CHECKING:
    from gputui.diagnose.merge.node_line import NodeLine

MAX_STACKS = 256  # odd ranks' stack entries carried in a merged line


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
