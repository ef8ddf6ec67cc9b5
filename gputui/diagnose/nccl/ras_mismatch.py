"""Ranks that NCCL RAS calls behind while their own GPUs spin: a mismatch, not a straggler.

Apart from gputui.diagnose.nccl.ras (which reads RAS's answers alone) because it joins them to
the NVML verdict: which GPUs of the job spin, and whether any is a suspect.
"""

from __future__ import annotations

from typing import Any

from gputui.diagnose.verdict import Verdict


def behind_yet_spinning(
    found: list[str],
    summary: dict[str, Any],
    verdict: Verdict,
    local: set[int],
    ranks: Any = None,
) -> list[str]:
    """Ranks RAS calls behind in a collective, while their own GPUs spin in one: they wait in
    another collective, so the ranks entered different ones (a mismatch, not a straggler).

    Seen on 4 x H200 at the first collective of a job (rank 0 in broadcast, ranks 1-3 in
    all_reduce): RAS's counts differ in Broadcast alone ("ranks 1-3 behind at Broadcast
    count 0, the other 1 rank 1"), since no all_reduce completed on any rank; every GPU of
    the job spins, so nobody is outside a collective. Said only when every rank called
    behind is on this node and its GPU is among the spinning, and no GPU of the job is a
    suspect (a rank outside any collective would be the simpler answer), and no GPU of a
    rank called behind also holds a rank that is not (`ranks`, the record's local ranks: on
    a shared GPU the spin may be the other rank's, as in tests/data/h100-shared-gpu-stuck)."""
    behind = summary.get("behind") or []
    if summary.get("mismatch") or not behind or not verdict.spinning or verdict.suspects:
        return found
    spinning = set(verdict.spinning)
    ops = {b.get("op") for b in behind}
    if len(ops) != 1 or not all(
        b.get("pid") in local and b.get("gpu") in spinning and b.get("confirmed") for b in behind
    ):
        return found
    op = next(iter(ops))
    behind_ranks = {b.get("rank") for b in behind}
    shared: set[Any] = set()
    for r in ranks if isinstance(ranks, list) else []:
        if isinstance(r, dict) and r.get("rank") not in behind_ranks:
            gpus = r.get("gpus")
            shared.update(gpus if isinstance(gpus, list) else [r.get("gpu")])
    if any(b.get("gpu") in shared for b in behind):
        return found
    ranks = sorted(b["rank"] for b in behind if isinstance(b.get("rank"), int))
    if not ranks:
        return found
    top = behind[0].get("others")
    who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {_rank_list(ranks)}"
    text = (
        f"NCCL RAS: ranks entered different collectives: {who} never entered {op} #{top} "
        f"that the others entered, and wait in another collective (their GPUs spin) "
        "(a collective-type mismatch: the ranks took different code paths)."
    )
    summary["mismatch"] = True
    summary["mismatch_ranks"] = ranks
    return [text, *found]


def _rank_list(ranks: list[int]) -> str:
    """1,2,3 -> '1-3'; 0,2 -> '0, 2' (as RAS's own sentences write them)."""
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(str(r) for r in ranks)
