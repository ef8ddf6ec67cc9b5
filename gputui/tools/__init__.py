"""Attach tools (py-spy, gdb/cuda-gdb, strace), dump-all-ranks and incident bundles.

No Textual here (an import-linter contract enforces it): the UI wraps these functions in
thread workers, the CLI calls them directly. Every external call is bounded, takes an
argument list (never a shell), and reports a ToolResult instead of raising.

The names below are imported on first use (PEP 562): importing one submodule (the
dashboard's rendezvous watch, at start-up) does not import the stack tools with it.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Outcome": "gputui.tools.result",
    "ToolResult": "gputui.tools.result",
    "gdb_backtrace": "gputui.tools.stacks",
    "py_spy_dump": "gputui.tools.stacks",
    "strace_follow": "gputui.tools.stacks",
}

__all__ = ["Outcome", "ToolResult", "gdb_backtrace", "py_spy_dump", "strace_follow"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
