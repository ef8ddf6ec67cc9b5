"""Following a process's system calls: `strace -f -tt -p PID`, bounded in time and lines.

Apart from the stack tools (gputui.tools.attach.stacks) because strace is no stack dump: it
never finishes by itself, so either bound ending it is a normal end, and its lines are the
calls as they happen (redacted like every attached tool's output).
"""

from __future__ import annotations

from gputui.tools.attach.ptrace import Target
from gputui.tools.attach.stacks import TargetLike, attach_run, tool_missing
from gputui.tools.result import Cancel, LineSink, ToolResult
from gputui.tools.which import find_tool, missing_message

STRACE_SECONDS = 30.0
STRACE_MAX_LINES = 5000


def strace_follow(
    target: TargetLike,
    *,
    seconds: float = STRACE_SECONDS,
    max_lines: int = STRACE_MAX_LINES,
    on_line: LineSink | None = None,
    cancel: Cancel | None = None,
    tool_path: str | None = None,
) -> ToolResult:
    """`strace -f -tt -p PID` until cancelled, `seconds` pass or `max_lines` lines came.

    Reaching either bound is a normal end (DONE): strace never finishes by itself.

    Args:
        target: the process: a pid, its ProcessInfo, or a ptrace Target.
        seconds: the most seconds it follows.
        max_lines: the most lines it keeps.
        on_line: called with each line of output as it comes (from a worker thread); None: none.
        cancel: set to stop the tool at once (its process is killed); None: run to its end.
        tool_path: a directory to look for the tool in first; None: PATH (gputui.tools.which).

    Returns:
        The ToolResult: the system calls seen (redacted), DONE when a bound ended it.
    """
    exe = find_tool("strace", tool_path)
    if exe is None:
        return tool_missing("strace", target, missing_message("strace", tool_path))
    return attach_run(
        "strace",
        exe,
        ["-f", "-tt", "-p", str(Target.of(target).pid)],
        target,
        timeout=seconds,
        on_line=on_line,
        cancel=cancel,
        max_lines=max_lines,
        ok=lambda r: not any("attach: ptrace" in ln for ln in r.lines),
        timeout_is_done=True,
    )
