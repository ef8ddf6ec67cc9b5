"""Ranks in different collectives, said once, with what each source knows best.

Three sources can tell that ranks took different code paths, and each knows half of it:

- the stacks know each rank's *line* (the user frame that called into torch), but with NCCL a
  collective returns at once and the Python thread waits later, in `synchronize`: on 4 x H200
  the stacks alone said "rank 0 in synchronize (…:36), rank 1 in synchronize (…:75)", true
  and useless;
- NCCL RAS knows each rank's *collective* from its per-type counts (the rank ahead in
  Broadcast while the others are ahead in AllReduce called a broadcast);
- the flight recorder's analyzer names the culprit rank and both collective types.

`joined_mismatch` puts them together: "ranks in different collectives: rank 0 in broadcast
(train.py:75), rank 1 in all_reduce (train.py:36)", the collective from the flight recorder,
else RAS, else a stack frame that is a real collective (gloo's all_reduce blocks in Python),
and the line from the stacks. It is a MISMATCH finding placed before the sources' own, so it
leads; the sources' sentences stay below it. Pure, like every explainer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gputui.diagnose.ranking import Finding, Strength

SOURCE = "mismatch"
# NCCL's collective names (RAS counts) as torch.distributed names them.
NCCL_NAMES = {
    "allreduce": "all_reduce",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "sendrecv": "send/recv",
    "send": "send/recv",
    "recv": "send/recv",
}
NOT_COLLECTIVES = frozenset({"synchronize"})  # where NCCL ranks' Python waits: no op named
_SITE = re.compile(r"\(([^()]+:\d+)\)$")
_FR_TYPES = re.compile(
    r"Culprit rank (\d+);.*?Expected collective type: '([^']+)' does not match found "
    r"collective type: '([^']+)'"
)


def op_name(raw: Any) -> str | None:
    """'AllReduce', 'nccl:all_reduce', 'all_reduce_coalesced' -> 'all_reduce' (None if blank)."""
    if not isinstance(raw, str) or not raw.strip():
        return None
    text = raw.strip().split(":", 1)[-1]
    key = text.lower().replace("_", "")
    for nccl, name in NCCL_NAMES.items():
        if key == nccl or key.startswith(nccl + "coalesced"):
            return name
    return text[:40]


def site_of(frame: Any) -> str | None:
    """'step (train.py:36)' -> 'train.py:36'."""
    m = _SITE.search(frame) if isinstance(frame, str) else None
    return m.group(1) if m else None


def joined_mismatch(
    found: Sequence[Finding], stacks: Sequence[Mapping[str, Any]], extras: Iterable[Any]
) -> Finding | None:
    """One sentence naming each rank's collective and line, when some source says the ranks
    are in different collectives, NCCL RAS or the flight recorder names the collectives, and
    the stacks give the lines (either alone says no more than its own sentence)."""
    if not any(f.strength == Strength.MISMATCH and f.source != SOURCE for f in found):
        return None
    lines: dict[int, str] = {}
    frames: dict[int, str] = {}
    from_stacks: dict[int, str] = {}
    for e in stacks:
        rank = e.get("rank")
        if not isinstance(rank, int) or e.get("outcome") != "done":
            continue
        frame = e.get("line") if isinstance(e.get("line"), str) else e.get("frame")
        if isinstance(frame, str) and (site := site_of(frame)):
            lines[rank], frames[rank] = site, frame
        op = op_name(e.get("collective"))
        if op is not None and op not in NOT_COLLECTIVES:
            from_stacks[rank] = op
    ras: dict[int, str] = {}
    fr: dict[int, str] = {}
    for extra in extras:
        if not isinstance(extra, Mapping):
            continue
        _ras_ops(extra.get("mismatch_ops"), ras)
        _fr_ops(extra.get("flightrec"), fr, set(lines) | set(from_stacks) | set(ras))
    if not lines or not (ras or fr):
        return None  # one source alone: its own sentence says as much (the stacks', RAS's)
    ops = {**from_stacks, **ras, **fr}  # the strongest source last: it wins
    if len(set(ops.values())) < 2:
        return None
    groups: dict[tuple[str, str | None], list[int]] = {}
    for rank in sorted(ops):
        groups.setdefault((ops[rank], lines.get(rank)), []).append(rank)
    said = ", ".join(
        f"{_ranks(rs)} in {op}" + (f" ({line})" if line else "")
        for (op, line), rs in sorted(groups.items(), key=lambda kv: kv[1][0])
    )
    by_op: dict[str, list[int]] = {}
    for rank, op in ops.items():
        by_op.setdefault(op, []).append(rank)
    odd = min(reversed(sorted(by_op.values())), key=len)
    told = [n for n, d in (("the flight recorder", fr), ("NCCL RAS", ras)) if d]
    whence = f" (collectives from {' and '.join(told)}" if told else " (collectives"
    whence += ", lines from the stacks)" if lines else ")"
    return Finding(
        "ranks in different collectives: " + said + whence,
        Strength.MISMATCH,
        SOURCE,
        ranks=tuple(sorted(odd)),
        frame=next((frames[r] for r in sorted(odd) if r in frames), None),
        headline="ranks in different collectives: " + said,
    )


def _ranks(rs: list[int]) -> str:
    return ("rank " if len(rs) == 1 else "ranks ") + ",".join(map(str, rs))


def _ras_ops(v: Any, out: dict[int, str]) -> None:
    """RAS's per-rank collective ({"1": "Broadcast"}): the type each rank is ahead in."""
    if not isinstance(v, Mapping):
        return
    for k, op in list(v.items())[:1024]:
        name = op_name(op)
        if name is not None and isinstance(k, str) and k.isdigit():
            out[int(k)] = name


def _fr_ops(fr: Any, out: dict[int, str], others: set[int]) -> None:
    """The analyzer's COLLECTIVE_TYPE_MISMATCH: the culprit rank in the type it found, the
    other ranks known here (and the analyzer's dumps) in the type it expected."""
    if not isinstance(fr, Mapping):
        return
    items = fr.get("findings")
    dumps = fr.get("dumps")
    dumped = dumps if isinstance(dumps, list) else []
    ranks = set(others) | {d for d in dumped if isinstance(d, int)}
    for x in items if isinstance(items, list) else []:
        if not isinstance(x, Mapping) or x.get("kind") != "errors":
            continue
        m = _FR_TYPES.search(str(x.get("error") or ""))
        if m is None:
            continue
        culprit, expected, got = int(m.group(1)), op_name(m.group(2)), op_name(m.group(3))
        if expected is None or got is None:
            continue
        for r in ranks - {culprit}:
            out.setdefault(r, expected)
        out[culprit] = got
        return
