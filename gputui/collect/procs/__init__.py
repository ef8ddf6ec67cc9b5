"""Host processes, read through psutil and /proc: the process table, jobs and ranks from
the environment, owners (pods, Slurm), PID namespaces, where ranks write, their progress,
the libraries they loaded.
"""

from __future__ import annotations

from gputui.faces import lazy_face

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
    "RankIOTracker": "rank_tracker",
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


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
