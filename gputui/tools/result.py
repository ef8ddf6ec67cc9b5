"""What running a tool against a process came to, in one value the CLI and the UI both show.

Tools never raise for things that happen to the target or the node (missing binary, ptrace
refused, process exited, timeout): those are outcomes the user must read, so they travel as
data with a one-line message that says what to do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

LineSink = Callable[[str], None]
"""Called with each line of a tool's output (without the newline), as it arrives."""

Cancel = threading.Event
"""Set it to stop a running tool; the tool's whole process group is then killed."""


class Outcome(str, Enum):
    DONE = "done"  # the tool ran and produced its output
    TIMEOUT = "timeout"  # killed after its time limit
    MISSING = "missing"  # the tool is not installed (the message says how to get it)
    PERMISSION = "permission"  # ptrace refused (the message says what to change)
    GONE = "gone"  # the target process exited (before or during the run)
    FAILED = "failed"  # the tool ran and failed for another reason
    CANCELLED = "cancelled"  # the user stopped it
    REFUSED = "refused"  # not attempted: recorded process, or a recycled pid

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ToolResult:
    """One tool run against one process."""

    tool: str  # "py-spy", "py-spy --native", "gdb", "cuda-gdb", "strace", ...
    pid: int | None
    outcome: Outcome
    message: str  # one line for the user; says what to do when something went wrong
    lines: tuple[str, ...] = ()
    elapsed_s: float = 0.0
    target_state_after: str | None = None  # e.g. "S (sleeping)"; None when not checked/gone
    exit_code: int | None = None
    truncated: bool = False  # output stopped at the line bound
    argv: tuple[str, ...] = field(default=(), compare=False)

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.DONE

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def summary(self) -> str:
        """One line: `py-spy pid 814: done in 0.02 s` or `... : gone: process 815 exited`."""
        who = f" pid {self.pid}" if self.pid is not None else ""
        head = f"{self.tool}{who}: {self.outcome}"
        if self.outcome is Outcome.DONE:
            head += f" in {self.elapsed_s:.2f} s"
        tail = f": {self.message}" if self.message else ""
        state = f" [target: {self.target_state_after}]" if self.target_state_after else ""
        return head + tail + state

    def summary_lines(self) -> list[str]:
        return [self.summary()]

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "pid": self.pid,
            "outcome": self.outcome.value,
            "message": self.message,
            "elapsed_s": round(self.elapsed_s, 3),
            "target_state_after": self.target_state_after,
            "exit_code": self.exit_code,
            "truncated": self.truncated,
            "lines": list(self.lines),
        }
