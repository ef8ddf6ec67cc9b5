"""Test-only fault injection, read by the worker from GPUTUI_PROBE_FAULT.

Why in the worker: the point is to exercise the real failure paths (a pair whose processes
never finish and must be killed; data that arrives wrong and must be caught by the check),
not a shortcut in the parent. Format: comma-separated `KIND:I-J`, e.g. `hang:1-2,corrupt:0-3`.

- hang: both ranks of that pair block forever after rendezvous (the runner must kill them)
- corrupt: one byte of each copy and one all_reduce element arrive wrong (the check fails)
- exit: the pair's worker writes a line to stderr and exits with status 3
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV = "GPUTUI_PROBE_FAULT"
KINDS = ("hang", "corrupt", "exit")


def parse_faults(text: str) -> dict[frozenset[int], set[str]]:
    """`"hang:1-2,corrupt:0-3"` -> {frozenset({1, 2}): {"hang"}, ...}. ValueError if malformed."""
    out: dict[frozenset[int], set[str]] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        kind, sep, pair = item.partition(":")
        a, dash, b = pair.partition("-")
        if not sep or not dash or kind not in KINDS:
            raise ValueError(f"bad {ENV} entry {item!r} (expected KIND:I-J, KIND in {KINDS})")
        try:
            key = frozenset((int(a), int(b)))
        except ValueError:
            raise ValueError(f"bad {ENV} entry {item!r}: GPU indices must be integers") from None
        if len(key) != 2:
            raise ValueError(f"bad {ENV} entry {item!r}: a pair needs two different GPUs")
        out.setdefault(key, set()).add(kind)
    return out


def faults_for(a: int, b: int, env: Mapping[str, str] | None = None) -> set[str]:
    """The faults injected into pair (a, b), in either order."""
    text = (os.environ if env is None else env).get(ENV, "")
    return parse_faults(text).get(frozenset((a, b)), set()) if text else set()
