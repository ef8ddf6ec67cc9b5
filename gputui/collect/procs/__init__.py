"""Host processes, read through psutil and /proc: the process table, jobs and ranks from
the environment, owners (pods, Slurm), PID namespaces, where ranks write, their progress,
the libraries they loaded.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "alive",
    "ancestors",
    "command_of",
    "core_pattern",
    "Counters",
    "describe",
    "exe_name",
    "HostRank",
    "HostRankScanner",
    "listeners",
    "Owner",
    "process_libraries",
    "program_name",
    "rank_from_env",
    "RankIO",
    "RankIOTracker",
    "read_counters",
    "read_tail",
    "RECORD_TAIL",
    "refresh_tail",
    "resolve",
    "Stream",
    "stream",
    "TAIL_MAX",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "describe": "hostranks",
    "process_libraries": "libraries",
    "HostRank": "hostranks",
    "HostRankScanner": "hostranks",
    "listeners": "hostranks",
    "rank_from_env": "jobs",
    "Owner": "owner",
    "Counters": "progress",
    "read_counters": "progress",
    "alive": "rankio",
    "ancestors": "rankio",
    "core_pattern": "rankio",
    "program_name": "rankio",
    "RankIO": "rankio",
    "RankIOTracker": "rankio",
    "read_tail": "rankio",
    "RECORD_TAIL": "rankio",
    "refresh_tail": "rankio",
    "resolve": "rankio",
    "Stream": "rankio",
    "stream": "rankio",
    "TAIL_MAX": "rankio",
    "command_of": "reader",
    "exe_name": "reader",
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
