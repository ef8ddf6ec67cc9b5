"""What NCCL RAS says about one communicator, in sentences: who is dead, who does not
answer, who reported an error, who entered a different collective, who is behind.

RAS gives, per communicator, the number of operations of each collective type that every
rank has launched. In a hang the ranks that entered the next collective wait inside it; a
rank that never launched it is *behind*. A count that differs between two answers taken a
few seconds apart means NCCL is still moving, so "behind" is only claimed when the two
answers agree ("unchanged over 3 s"); with one answer it is said with that caveat. A rank
ahead in one collective type and behind in another took a different code path: that is a
collective-type mismatch, said first. The record as a whole (both answers, the job's pids,
the order and the cap of the sentences) is judged in ras.py.
"""

from __future__ import annotations

from typing import Any

from gputui.collect.nccl.ras_model import RasComm, RasRank
from gputui.diagnose.rank_lists import ranks_text as _ranks_text

_NCCL_ERRORS = {
    1: "unhandled CUDA error",
    2: "system error",
    3: "internal error",
    4: "invalid argument",
    5: "invalid usage",
    6: "remote process error",
}


def secs(dt: float | None) -> str:
    """3.0 -> '3', 0.52 -> '0.5'; whole seconds from 2 s on (3.1 -> '3'), so answers asked
    every 3 s say the same words and `check --json` prints a line only when they change."""
    if (dt or 0) >= 2:
        return f"{dt:.0f}"
    return f"{dt or 0:.1f}".removesuffix(".0")


def on_this_node(pid: int | None, local: set[int]) -> str:
    """ " on this node" for a process of this node (a host RAS names by address is not
    "another host" then: gputui.diagnose.merge.host_blame reads these words)."""
    return " on this node" if pid is not None and pid in local else ""


def _who(r: RasRank, local: set[int]) -> str:
    where = r.where()
    here = on_this_node(r.pid, local)
    return f"rank {r.rank}" + (f" ({where}{here})" if where else here)


def _op_state(c: RasComm, op: str) -> tuple[int, set[int], set[int]] | None:
    """(top count, ranks known at it, ranks known below it) for an op the ranks disagree on."""
    dist = c.ops.get(op) or []
    if len(dist) < 2:
        return None
    top = max(v for v, _ in dist)
    ahead = {r.rank for r in c.ranks if r.counts.get(op) == top}
    behind = {r.rank for r in c.ranks if op in r.counts and r.counts[op] < top}
    return top, ahead, behind


def comm_findings(
    c: RasComm, old: RasComm | None, dt: float | None, local: set[int], out: dict[str, Any]
) -> list[str]:
    """Sentences about one communicator, most important first; fills out['behind']."""
    found: list[str] = []
    for m in c.missing:
        if m.dead:
            found.append(
                f"NCCL RAS: {_who(m, local)} is dead: unreachable for 60 s "
                "(its process exited, or its node is down)."
            )
        else:
            found.append(
                f"NCCL RAS: {_who(m, local)} does not answer (stopped, hung hard, or its node "
                "is unreachable)."
            )
        out["missing"].append(
            {"rank": m.rank, "host": m.host, "pid": m.pid, "gpu": m.gpu, "dead": bool(m.dead)}
        )
    for r in c.ranks:
        if r.abort_flag:
            found.append(f"NCCL RAS: {_who(r, local)} aborted its communicator.")
        for label, code in (
            ("an initialization", r.init_state),
            ("an asynchronous", r.async_error),
        ):
            if code is not None and code not in (0, 7):
                name = _NCCL_ERRORS.get(code, f"error {code}")
                found.append(f"NCCL RAS: {_who(r, local)} reported {label} error: {name}.")
        if r.error:
            found.append(f"NCCL RAS: {_who(r, local)} reported {r.error}.")
    states = {op: s for op in c.ops if (s := _op_state(c, op)) is not None}
    odd = _mismatched(c, states)
    if odd:
        parts = []
        for n in odd:
            rk = c.rank(n) or RasRank(rank=n)
            bits = []
            for op, (top, ahead, behind) in states.items():
                mine = rk.counts.get(op)
                if n in ahead:
                    bits.append(f"ahead in {op} ({mine} vs {_others(c, op, mine)})")
                elif n in behind:
                    bits.append(f"behind in {op} ({mine} vs {top})")
            parts.append(f"{_who(rk, local)} is " + " and ".join(bits))
        found.append(
            "NCCL RAS: ranks entered different collectives: "
            + "; ".join(parts)
            + " (a collective-type mismatch: the ranks took different code paths)."
        )
        out["mismatch"] = True
        out["mismatch_ranks"] = sorted(set(out.get("mismatch_ranks", [])) | set(odd))
        # Each rank's collective: the one type it is ahead in (gputui.diagnose.collective_mismatch).
        for r in c.ranks:
            ahead_in = [op for op, (_top, ahead, _b) in states.items() if r.rank in ahead]
            if len(ahead_in) == 1:
                out.setdefault("mismatch_ops", {})[str(r.rank)] = ahead_in[0]
        return found
    size = c.size or c.reporting
    for op, (top, _ahead, behind_known) in states.items():
        dist = c.ops[op]
        same = old is not None and sorted(old.ops.get(op) or []) == sorted(dist)
        if old is not None and not same:
            before = "/".join(str(v) for v, _ in sorted(old.ops.get(op) or [], reverse=True))
            now = "/".join(str(v) for v, _ in sorted(dist, reverse=True))
            found.append(
                f"NCCL RAS: {op} counts still move ({before} -> {now} over {secs(dt)} s): "
                "NCCL is making progress, no rank is stuck behind."
            )
            continue
        n_top = sum(n for v, n in dist if v == top)
        when = (
            f"unchanged over {secs(dt)} s" if same and dt else "one query only, not yet confirmed"
        )
        listed = sorted(behind_known)
        by_count: dict[int, list[RasRank]] = {}
        for n in listed:
            rk = c.rank(n) or RasRank(rank=n)
            by_count.setdefault(rk.counts[op], []).append(rk)
            out["behind"].append(
                {
                    "rank": n,
                    "host": rk.host,
                    "pid": rk.pid,
                    "gpu": rk.gpu,
                    "op": op,
                    "count": rk.counts[op],
                    "others": top,
                    "confirmed": bool(same),
                }
            )
        others = f"the other {n_top} rank{'s' if n_top != 1 else ''} {top}, {when}"
        for count, group in sorted(by_count.items()):
            if len(group) <= 2:
                for rk in group:
                    found.append(
                        f"NCCL RAS: {_who(rk, local)} is behind: {op} count {count}, {others}."
                    )
            else:
                hosts = sorted({rk.host for rk in group if rk.host})
                on = f" on {', '.join(hosts[:4])}" + (" ..." if len(hosts) > 4 else "")
                found.append(
                    f"NCCL RAS: {len(group)} ranks are behind: "
                    f"{_ranks_text([rk.rank for rk in group])}{on if hosts else ''} at {op} "
                    f"count {count}, {others}."
                )
        n_behind = sum(n for v, n in dist if v < top)
        if n_behind > len(listed):
            shown = f" ({_ranks_text(listed)} among them)" if listed else ""
            verb = "is" if n_behind == 1 else "are"
            found.append(
                f"NCCL RAS: {n_behind} of {size or '?'} ranks {verb} behind in {op} "
                f"(below {top}){shown}, {when}."
            )
    if not states and not c.missing and old is not None and c.ops:
        op, dist = max(c.ops.items(), key=lambda kv: kv[1][0][0] if kv[1] else 0)
        if dist and (old.ops.get(op) or []) == dist:
            found.append(
                f"NCCL RAS: all {size or dist[0][1]} ranks launched the same collectives "
                f"({op} {dist[0][0]}), unchanged over {secs(dt)} s: every rank entered the "
                "collective, so no rank stayed away; look at the network or the GPUs."
            )
    return found


def advanced(old: RasComm, new: RasComm) -> tuple[str, int, int] | None:
    """(op, before, now) of a collective type whose highest count grew between two answers
    (NCCL moves), or None."""
    for op, dist in new.ops.items():
        before = old.ops.get(op) or []
        if dist and before and (now := max(v for v, _ in dist)) > (b := max(v for v, _ in before)):
            return op, b, now
    return None


def _mismatched(c: RasComm, states: dict[str, tuple[int, set[int], set[int]]]) -> list[int]:
    """Ranks ahead in one collective type and behind in another, other than the majority.

    With every rank known (JSON), each rank has a pattern of counts; the most common
    pattern is the majority and every other rank is odd. With only the outliers known
    (text), the outliers that are ahead somewhere and behind elsewhere are odd.
    """
    mixed = {r for _, a, _ in states.values() for r in a}
    mixed &= {r for _, _, b in states.values() for r in b}
    if not mixed:
        return []
    full = [r for r in c.ranks if all(op in r.counts for op in states)]
    if len(full) < (c.size or len(full)) or len(full) < 2:
        return sorted(mixed)
    patterns: dict[tuple[int, ...], list[int]] = {}
    for r in full:
        patterns.setdefault(tuple(r.counts[op] for op in states), []).append(r.rank)
    majority = max(patterns.values(), key=len)
    return sorted(r for group in patterns.values() if group is not majority for r in group)


def _others(c: RasComm, op: str, mine: int | None) -> str:
    vals = sorted({v for v, _ in c.ops.get(op) or [] if v != mine})
    return "/".join(map(str, vals)) or "?"
