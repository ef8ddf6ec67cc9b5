"""Tools attached to one process or a job's ranks: py-spy, gdb/cuda-gdb, strace, with the
ptrace checks around each attach; dump-all, core files, the straggler's profile, the way out.
"""

from __future__ import annotations

from gputui.faces import lazy_face

__all__ = [
    "core_backtrace",
    "dump_all",
    "DumpAll",
    "end_ranks",
    "find_job",
    "gdb_backtrace",
    "GRACE_S",
    "JobMembers",
    "permission_advice",
    "preflight",
    "PROFILE_SECONDS",
    "py_spy_dump",
    "ranks_here",
    "stacks_record",
    "strace_follow",
    "StragglerProfiler",
    "Target",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "core_backtrace": "core",
    "dump_all": "dumpall",
    "DumpAll": "dumpall",
    "stacks_record": "dumpall",
    "end_ranks": "endjob",
    "GRACE_S": "endjob",
    "ranks_here": "endjob",
    "find_job": "jobfind",
    "JobMembers": "jobfind",
    "PROFILE_SECONDS": "profile",
    "StragglerProfiler": "profile",
    "permission_advice": "ptrace",
    "preflight": "ptrace",
    "Target": "ptrace",
    "gdb_backtrace": "stacks",
    "py_spy_dump": "stacks",
    "strace_follow": "strace",
}


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
