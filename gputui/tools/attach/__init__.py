"""Tools attached to one process or a job's ranks: py-spy, gdb/cuda-gdb, strace, with the
ptrace checks around each attach; dump-all, core files, the straggler's profile, the way out.
"""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    """A name of the face, imported on first use (PEP 562): importing one module of this
    package (the dashboard's first frame imports a few) does not import the others."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
