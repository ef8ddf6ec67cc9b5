"""Rank lists as a person writes them: 'rank 62', 'ranks 0-61,63' (runs collapsed).

One function for every finding that names many ranks (the flight recorder's missing ranks,
a stack group across nodes, RAS's ranks behind), so they read alike.
"""

from __future__ import annotations

from collections.abc import Iterable


def ranks_text(ranks: Iterable[int]) -> str:
    """'rank 62' or 'ranks 0-61,63': runs of consecutive numbers collapsed.

    Args:
        ranks: rank numbers, in any order, repeats allowed.

    Returns:
        `rank N` for one, else `ranks` and the runs (`0-61,63`).
    """
    rs = sorted(set(ranks))
    runs: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        runs.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ("rank " if len(rs) == 1 else "ranks ") + ",".join(runs)
