"""Attach tools (py-spy, gdb/cuda-gdb, strace), dump-all-ranks and incident bundles.

No Textual here (an import-linter contract enforces it): the UI wraps these functions in
thread workers, the CLI calls them directly. Every external call is bounded, takes an
argument list (never a shell), and reports a ToolResult instead of raising.
"""

from gputui.tools.result import Outcome, ToolResult
from gputui.tools.stacks import gdb_backtrace, py_spy_dump, strace_follow

__all__ = ["Outcome", "ToolResult", "gdb_backtrace", "py_spy_dump", "strace_follow"]
