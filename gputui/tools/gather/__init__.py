"""The Watcher's gatherers that run tools or read the node: stacks of the stalled job's
ranks, NCCL RAS and the flight recorder, last words, late words, progress, rendezvous.
"""

from __future__ import annotations

from gputui.faces import lazy_face

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


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
