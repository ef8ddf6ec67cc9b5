"""The Watcher's gatherers that run tools or read the node: stacks of the stalled job's
ranks, NCCL RAS and the flight recorder, last words, late words, progress, rendezvous.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "gather_lastwords",
    "gather_nccl",
    "local_ranks",
    "ProgressPoller",
    "ras_enabled",
    "ras_query",
    "ras_setup",
    "RendezvousWatch",
    "Watched",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "gather_lastwords": "lastwords",
    "gather_nccl": "nccl",
    "local_ranks": "nccl",
    "ras_enabled": "nccl",
    "ras_query": "nccl",
    "ras_setup": "nccl",
    "ProgressPoller": "progress",
    "Watched": "progress",
    "RendezvousWatch": "rendezvous",
}


def __getattr__(name: str) -> Any:
    """A name of the face, imported on first use (PEP 562): importing one module of this
    package (the dashboard's first frame imports a few) does not import the others."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
