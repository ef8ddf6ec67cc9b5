"""py-spy, gdb/cuda-gdb and strace against one process, with the checks around each attach.

Every function here takes a pid, a ProcessInfo (its create time is then checked, and a
process from a recording is refused) or a Target; streams lines to `on_line`; stops when
`cancel` is set; and returns a ToolResult whose message says what to do when it failed.
Default time limits come from the calibration runs on a hung H200 rank: py-spy took 14 ms,
py-spy --native 0.2-0.5 s, cuda-gdb `thread apply all bt` 11-14 s.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Sequence

from gputui.collect.model import ProcessInfo
from gputui.tools.attach import ptrace, pyspy_json
from gputui.tools.attach.ptrace import Target
from gputui.tools.result import Cancel, LineSink, Outcome, ToolResult
from gputui.tools.runner import line_redactor, run_tool
from gputui.tools.which import find_tool, missing_message, native_debugger

PY_SPY_TIMEOUT_S = 10.0
PY_SPY_NATIVE_TIMEOUT_S = 20.0
GDB_TIMEOUT_S = 60.0
GDB_FRAMES = 30

TargetLike = int | ProcessInfo | Target

_PERMISSION = re.compile(
    r"Operation not permitted|Permission denied|os error 1\b|os error 13\b|EPERM", re.I
)
_GONE = re.compile(
    r"No such process|os error 2\b|os error 3\b|No such file or directory|"
    r"Failed to get process executable name|process is not running|\+\+\+ exited with|"
    r"\+\+\+ killed by",
    re.I,
)

BUSY_WAIT_S = 2.0  # how long an attach waits for another tracer to let go of the target

_ERROR_LINE = re.compile(r"\s*(Error:|error:|ptrace:|strace:|warning: .*fail)", re.I)


def _classify(
    tool: str,
    target: Target,
    res: ToolResult,
    ok: Callable[[ToolResult], bool],
) -> tuple[Outcome, str]:
    """Turn a finished run into an outcome and a message the user can act on."""
    text = res.text
    if res.outcome in (Outcome.TIMEOUT, Outcome.CANCELLED, Outcome.MISSING):
        if not ptrace.still_same(target):
            return Outcome.GONE, f"process {target.pid} exited while {tool} ran"
        return res.outcome, res.message
    if not ptrace.still_same(target):
        return Outcome.GONE, f"process {target.pid} exited while {tool} ran"
    if res.outcome is Outcome.DONE and ok(res):
        return Outcome.DONE, res.message
    if _PERMISSION.search(text):
        return Outcome.PERMISSION, ptrace.permission_advice(target.pid, tool)
    if _GONE.search(text):
        return Outcome.GONE, f"process {target.pid} exited while {tool} ran"
    msg = res.message
    said = next((ln.strip() for ln in res.lines if _ERROR_LINE.match(ln)), None)
    if said and res.outcome is Outcome.FAILED:
        msg = f"exited with status {res.exit_code}: {said}"
    if res.outcome is Outcome.DONE:  # status 0 but no usable output
        last = next((ln.strip() for ln in reversed(res.lines) if ln.strip()), "no output")
        msg = f"no stack in the output ({last})"
    return Outcome.FAILED, msg


def attach_run(
    tool: str,
    exe: str,
    args: Sequence[str],
    target: TargetLike,
    *,
    timeout: float,
    on_line: LineSink | None = None,
    cancel: Cancel | None = None,
    max_lines: int | None = None,
    ok: Callable[[ToolResult], bool] = lambda r: True,
    timeout_is_done: bool = False,
) -> ToolResult:
    """Check the target, run the tool, classify the result, and check the target again."""
    t = Target.of(target)
    problem = ptrace.preflight(t)
    if problem is not None:
        return ToolResult(tool, t.pid, problem[0], problem[1])
    # One of our tools at a time on a pid: a second attach while the first holds it (the
    # progress poller's dump and the stacks gatherer's) read its tracing stop, or its
    # moment of running between two attaches, as the owner's, and resumed a rank that
    # someone had stopped on purpose (seen under load in CI).
    with ptrace.one_tool_at_a_time(t.pid, min(BUSY_WAIT_S, timeout)):
        stopped_before = ptrace.state_letter(t.pid) in ("T", "t")
        argv = [exe, *args]
        redact = line_redactor(t.pid)  # py-spy's header: the command line, by the table's rules

        def run(seconds: float) -> ToolResult:
            return run_tool(
                argv,
                timeout=seconds,
                on_line=on_line,
                cancel=cancel,
                max_lines=max_lines,
                tool=tool,
                pid=t.pid,
                redact=redact,
            )

        try:
            res = run(timeout)
        except BaseException:  # Ctrl-C: the tool was stopped (runner); resume a left SIGSTOP
            ptrace.settle(t, stopped_before, killed=True)
            raise
        outcome, msg = _classify(tool, t, res, ok)
        if outcome is Outcome.PERMISSION and (holder := ptrace.held_by(t.pid)):
            # Another tracer holds it (a second gputui's auto-dump, a debugger): wait briefly
            # for it to let go and try once more, within this call's own time.
            left, waited_from = timeout - res.elapsed_s, time.monotonic()
            if left > 0.5 and ptrace.wait_untraced(t.pid, min(BUSY_WAIT_S, left / 2), cancel):
                res = run(max(0.2, left - (time.monotonic() - waited_from)))
                outcome, msg = _classify(tool, t, res, ok)
            elif holder := ptrace.held_by(t.pid):
                msg = (
                    f"process {t.pid} is being traced by {holder}: one tracer at a time, so "
                    f"{tool} cannot attach until it detaches; try again then"
                )
        killed = res.outcome in (Outcome.TIMEOUT, Outcome.CANCELLED) or res.truncated
        if timeout_is_done and outcome is Outcome.TIMEOUT:
            outcome, msg = Outcome.DONE, f"followed for {timeout:g} s"
        state = ptrace.settle(t, stopped_before, killed)
        if state is None and outcome is Outcome.DONE:
            state = "gone (it exited just after)"  # the output is still good: keep it
        elif state is None and outcome not in (Outcome.GONE, Outcome.REFUSED):
            outcome, msg = Outcome.GONE, f"process {t.pid} exited while {tool} ran"
        if stopped_before:
            msg = (msg + "; " if msg else "") + "the process was already stopped before the attach"
        return ToolResult(
            tool=tool,
            pid=t.pid,
            outcome=outcome,
            message=msg,
            lines=res.lines,
            elapsed_s=res.elapsed_s,
            target_state_after=state,
            exit_code=res.exit_code,
            truncated=res.truncated,
            argv=tuple(argv),
        )


def tool_missing(tool: str, target: TargetLike, msg: str) -> ToolResult:
    t = Target.of(target)
    problem = ptrace.preflight(t)  # a recording or a gone pid says more than a missing tool
    if problem is not None:
        return ToolResult(tool, t.pid, problem[0], problem[1])
    return ToolResult(tool, t.pid, Outcome.MISSING, msg)


def _has_python_frames(res: ToolResult) -> bool:
    return any(ln.startswith("Thread ") for ln in res.lines)


def py_spy_dump(
    target: TargetLike,
    *,
    native: bool = False,
    timeout: float | None = None,
    on_line: LineSink | None = None,
    cancel: Cancel | None = None,
    tool_path: str | None = None,
) -> ToolResult:
    """`py-spy dump --pid PID [--native]`: every Python thread's stack, briefly pausing it.

    Args:
        target: the process: a pid, its ProcessInfo, or a ptrace Target.
        native: `--native`: C/C++ frames too.
        timeout: seconds py-spy may take; None: its default bound.
        on_line: called with each line of output as it comes (from a worker thread); None: none.
        cancel: set to stop the tool at once (its process is killed); None: run to its end.
        tool_path: a directory to look for the tool in first; None: PATH (gputui.tools.which).

    Returns:
        The ToolResult: py-spy's lines (redacted), or the outcome and one message saying why not.
    """
    tool = "py-spy --native" if native else "py-spy"
    exe = find_tool("py-spy", tool_path)
    if exe is None:
        return tool_missing(tool, target, missing_message("py-spy", tool_path))
    args = ["dump", "--pid", str(Target.of(target).pid)] + (["--native"] if native else [])
    limit = timeout or (PY_SPY_NATIVE_TIMEOUT_S if native else PY_SPY_TIMEOUT_S)
    res = attach_run(
        tool,
        exe,
        args,
        target,
        timeout=limit,
        on_line=on_line,
        cancel=cancel,
        ok=_has_python_frames,
    )
    if res.outcome is Outcome.FAILED and pyspy_json.needs_json(res.text):
        left = max(1.0, limit - res.elapsed_s)
        return _py_spy_json(tool, exe, args, target, res, left, on_line, cancel)
    return res


def _py_spy_json(
    tool: str,
    exe: str,
    args: list[str],
    target: TargetLike,
    failed: ToolResult,
    timeout: float,
    on_line: LineSink | None,
    cancel: Cancel | None,
) -> ToolResult:
    """The same dump through `--json`, written as the text dump (pyspy_json): py-spy's text
    dump fails on a command line that is not UTF-8. The first failure stands when this one
    fails too."""
    pid = Target.of(target).pid
    res = attach_run(
        tool, exe, [*args, "--json"], target, timeout=timeout, cancel=cancel, ok=lambda r: True
    )
    lines = pyspy_json.text_lines(pid, res.text) if res.outcome is Outcome.DONE else None
    if lines is None:
        return failed
    for line in lines:
        if on_line is not None:
            on_line(line)
    return dataclasses.replace(
        res,
        lines=tuple(lines),
        elapsed_s=failed.elapsed_s + res.elapsed_s,
        message="its command line is not UTF-8: read with py-spy dump --json",
    )


def gdb_command(pid: int, frames: int = GDB_FRAMES) -> list[str]:
    """gdb/cuda-gdb arguments: attach, list threads, backtrace each, detach (batch mode).

    Scripts beside the target's libraries (libpython's `-gdb.py`) are not auto-loaded: gdb
    declined them anyway outside its safe path, with a 10-line warning above the backtrace.
    gdb's own internal errors write no core file: in batch mode gdb answers its "create a
    core file of GDB?" with yes, into the person's working directory (a gdb stopped during
    the test suite's Ctrl-C runs once left a 90 MB `core` in the checkout).
    """
    return [
        "-batch",
        "-nx",
        "-iex",
        "set auto-load python-scripts off",
        "-iex",
        "set auto-load gdb-scripts off",
        "-iex",
        "maint set internal-error corefile no",
        "-iex",
        "maint set internal-warning corefile no",
        "-p",
        str(pid),
        "-ex",
        "set pagination off",
        "-ex",
        "info threads",
        "-ex",
        f"thread apply all bt {frames}",
    ]


def gdb_backtrace(
    target: TargetLike,
    *,
    timeout: float = GDB_TIMEOUT_S,
    frames: int = GDB_FRAMES,
    on_line: LineSink | None = None,
    cancel: Cancel | None = None,
    tool_path: str | None = None,
    debugger: str | None = None,
) -> ToolResult:
    """Native backtrace of every thread with gdb, or cuda-gdb when gdb is absent (cuda-gdb
    also shows the GPU kernel a rank is stuck in, e.g. ncclDevFunc_AllReduce_...).

    Args:
        target: the process: a pid, its ProcessInfo, or a ptrace Target.
        timeout: seconds gdb may take.
        frames: the most frames shown per thread.
        on_line: called with each line of output as it comes (from a worker thread); None: none.
        cancel: set to stop the tool at once (its process is killed); None: run to its end.
        tool_path: a directory to look for the tool in first; None: PATH (gputui.tools.which).
        debugger: the debugger to run (`gdb`, `cuda-gdb`); None: gdb, else cuda-gdb.

    Returns:
        The ToolResult: the backtraces, or the outcome and one message saying why not.
    """
    if debugger is not None:
        exe = find_tool(debugger, tool_path)
        found = (debugger, exe) if exe else None
    else:
        found = native_debugger(tool_path)
    if found is None:
        name = debugger or "gdb"
        msg = missing_message(name, tool_path)
        if debugger is None:
            msg = "no debugger: neither gdb nor cuda-gdb found: apt-get install gdb"
        return tool_missing(name, target, msg)
    name, exe = found
    return attach_run(
        name,
        exe,
        gdb_command(Target.of(target).pid, frames),
        target,
        timeout=timeout,
        on_line=on_line,
        cancel=cancel,
        ok=lambda r: any(re.match(r"#\d+\s", ln) for ln in r.lines),
    )
