"""Round-robin pairing (the circle method), so disjoint pairs run at the same time.

Why: a pair's measurement uses two GPUs; pairs that share no GPU can run together without
disturbing each other, so N GPUs need N-1 rounds (N even) instead of N*(N-1)/2 one by one.
For N odd a "bye" is added: N rounds, each GPU sits one round out.
"""

from __future__ import annotations

from collections.abc import Sequence

Pair = tuple[int, int]


def round_robin(devices: Sequence[int]) -> list[list[Pair]]:
    """Rounds of disjoint pairs covering every unordered pair of `devices` exactly once.

    Each pair is ordered as the devices were given (the earlier device first).
    """
    devs: list[int | None] = list(devices)
    if len(set(devices)) != len(devices):
        raise ValueError(f"duplicate devices in {list(devices)}")
    if len(devs) < 2:
        return []
    if len(devs) % 2:
        devs.append(None)  # the bye
    n = len(devs)
    order = {d: i for i, d in enumerate(devices)}
    rounds: list[list[Pair]] = []
    ring = devs[1:]
    for _ in range(n - 1):
        line = [devs[0], *ring]
        pairs: list[Pair] = []
        for i in range(n // 2):
            a, b = line[i], line[n - 1 - i]
            if a is None or b is None:
                continue
            pairs.append((a, b) if order[a] < order[b] else (b, a))
        rounds.append(sorted(pairs, key=lambda p: (order[p[0]], order[p[1]])))
        ring = ring[-1:] + ring[:-1]  # rotate everything but the fixed first device
    return rounds


def rounds_with(devices: Sequence[int], gpu: int) -> list[list[Pair]]:
    """One round per pair that includes `gpu` (they all share it, so none can run beside
    another): the pair probe of one blamed GPU against each peer."""
    if gpu not in devices:
        raise ValueError(f"GPU {gpu} is not among {list(devices)}")
    order = {d: i for i, d in enumerate(devices)}
    pairs = [(gpu, d) if order[gpu] < order[d] else (d, gpu) for d in devices if d != gpu]
    return [[p] for p in pairs]


def all_pairs(devices: Sequence[int]) -> list[Pair]:
    """Every unordered pair, in the order a matrix lists them."""
    return [(a, b) for i, a in enumerate(devices) for b in devices[i + 1 :]]
