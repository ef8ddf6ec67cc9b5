"""Tools that act on processes and hosts, bounded: `attach` (py-spy, gdb/cuda-gdb, strace and
the ptrace checks, dump-all, cores, the straggler's profile, the way out), `gather` (the
Watcher's gatherers: stacks, NCCL, last words, progress, rendezvous), `bundle` (the incident
bundle), `fleet` (fan-out to many hosts or pods); at the top the runner every tool runs in,
its result type and where each tool is found.

No Textual here (an import-linter contract enforces it): the UI wraps these functions in
thread workers, the CLI calls them directly. Every external call is bounded, takes an
argument list (never a shell), and reports a ToolResult instead of raising.

The names below are imported on first use (PEP 562): importing one submodule (the
dashboard's rendezvous watch, at start-up) does not import the stack tools with it.
"""

from __future__ import annotations

from gputui.faces import lazy_face

__all__ = [
    "Cancel",
    "EpisodeWorker",
    "gdb_backtrace",
    "LineSink",
    "Outcome",
    "py_spy_dump",
    "strace_follow",
    "ToolResult",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "gdb_backtrace": "attach.stacks",
    "py_spy_dump": "attach.stacks",
    "strace_follow": "attach.strace",
    "EpisodeWorker": "episodes",
    "Cancel": "result",
    "LineSink": "result",
    "Outcome": "result",
    "ToolResult": "result",
}


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
