"""A bounded subprocess runner: one external tool, its output streamed line by line.

Why this shape: debuggers attached to a hung rank can themselves hang (cuda-gdb took 11-14 s
on a healthy attach), and a tool that is killed carelessly can leave its target stopped.
So every tool runs in its own session (process group), with an argument list (never a shell),
a time limit, an optional line bound and a cancel event; on any of them the whole group gets
SIGTERM (gdb detaches on it), then SIGKILL after a grace period. Output is read by a thread
and handed to `on_line` on the caller's thread, so a callback never runs concurrently with
itself.

Every line is redacted here, before anyone sees it (`on_line`, `ToolResult.lines`, the
messages built from them): py-spy prints the target's command line, gdb its string
arguments, strace its system call buffers. Panes, saved files, `dump --json`, bundles and
automatic dumps then all hold redacted text without having to remember to redact.

A tool's own internals are not shown: with RUST_BACKTRACE=1 in the user's environment,
py-spy followed its one-line error ("Error: Failed to get process executable name ...",
"Caused by: Permission denied") with its Rust backtrace (`anyhow::context...`,
`py_spy::main`), above gputui's explanation of the cause and the fix. Tools run with Rust's
backtraces off, and a `Stack backtrace:` block that comes anyway is left out.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from gputui.collect.procs.reader import command_of
from gputui.redact import redact_command, redact_text
from gputui.tools.result import Cancel, LineSink, Outcome, ToolResult

GRACE_S = 2.0  # SIGTERM -> SIGKILL; gdb needs a moment to detach from every thread
KEEP_LINES = 50_000  # lines kept in the result even without max_lines: memory stays bounded
_POLL_S = 0.05  # how often a cancel is noticed while the tool is silent
QUIET_RUST = {"RUST_BACKTRACE": "0", "RUST_LIB_BACKTRACE": "0"}  # py-spy: no backtrace
_BACKTRACE_HEAD = re.compile(r"^\s*stack backtrace:\s*$", re.I)
_BACKTRACE_LINE = re.compile(r"^\s*(?:\d+: \S|at \S|$)")  # "  3: py_spy::main", "  at src/.."


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the tool's process group, then SIGKILL what is left after `grace_s`."""
    pgid = proc.pid  # start_new_session=True: the tool leads its own group
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)  # stragglers in the group too, not only the leader
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process SIGKILL cannot stop
        pass


_HEADER = re.compile(r"Process (\d+): ")


def line_redactor(pid: int | None) -> Callable[[str], str]:
    """How each line of a tool attached to `pid` is redacted: as text, and py-spy's
    `Process N: <command line>` header by the process table's rules, with the process's own
    argv and its executable's names (read here, before the tool runs), so that
    `exec -a python redis-cli -a X` is still known as redis-cli."""
    argv, names = command_of(pid) if pid is not None else ((), ())

    def redact(line: str) -> str:
        m = _HEADER.match(line)
        if m is None:
            return redact_text(line)
        own = int(m.group(1)) == pid
        rest = redact_command(line[m.end() :], argv if own else (), names if own else None)
        return m.group(0) + rest

    return redact


def run_tool(
    argv: Sequence[str],
    *,
    timeout: float,
    on_line: LineSink | None = None,
    cancel: Cancel | None = None,
    max_lines: int | None = None,
    tool: str | None = None,
    pid: int | None = None,
    env: Mapping[str, str] | None = None,
    grace_s: float = GRACE_S,
    redact: Callable[[str], str] = redact_text,
) -> ToolResult:
    """Run `argv` for at most `timeout` seconds, streaming its stdout+stderr lines, each
    passed through `redact` first (line_redactor(pid) for a tool attached to a process).

    Outcome: DONE (exit status 0, or stopped at `max_lines` with truncated=True), FAILED
    (non-zero status), TIMEOUT, CANCELLED, MISSING (the executable does not exist).
    Knows nothing about targets: callers map a tool's messages to PERMISSION / GONE.
    """
    name = tool or os.path.basename(argv[0])
    start = time.monotonic()
    if cancel is not None and cancel.is_set():  # e.g. the rest of a dump-all after a cancel
        return ToolResult(name, pid, Outcome.CANCELLED, "stopped by the user", argv=tuple(argv))
    try:
        # argv is a list built by gputui (tool path + pid), never a shell string
        proc = subprocess.Popen(  # noqa: S603
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**(env if env is not None else os.environ), **QUIET_RUST},
        )
    except FileNotFoundError:
        return ToolResult(name, pid, Outcome.MISSING, f"{argv[0]} not found", argv=tuple(argv))
    except OSError as e:
        msg = f"cannot run {argv[0]}: {e.strerror or e}"
        return ToolResult(name, pid, Outcome.FAILED, msg, argv=tuple(argv))

    q: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    assert proc.stdout is not None
    out = proc.stdout

    def reader() -> None:
        try:
            for raw in iter(out.readline, b""):
                q.put(raw)
        except (OSError, ValueError):
            pass
        q.put(None)

    th = threading.Thread(target=reader, name=f"{name}-reader", daemon=True)
    th.start()

    keep = min(max_lines, KEEP_LINES) if max_lines else KEEP_LINES
    lines: list[str] = []
    count = 0
    truncated = False
    stop: Outcome | None = None  # why we stopped it, if we did
    deadline = start + timeout
    in_backtrace = False  # inside a Rust `Stack backtrace:` block: its frames are not shown

    def take(raw: bytes) -> None:
        nonlocal count, truncated, in_backtrace
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        if _BACKTRACE_HEAD.match(text):
            in_backtrace = True
            return
        if in_backtrace and _BACKTRACE_LINE.match(text):
            return
        in_backtrace = False
        line = redact(text)
        count += 1
        if len(lines) < keep:
            lines.append(line)
        else:
            truncated = True
        if on_line is not None:
            on_line(line)

    try:
        eof = False
        while True:
            if cancel is not None and cancel.is_set():
                stop = Outcome.CANCELLED
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                stop = Outcome.TIMEOUT
                break
            try:
                item = q.get(timeout=min(remaining, _POLL_S))
            except queue.Empty:
                continue
            if item is None:
                eof = True
                break
            take(item)
            if max_lines and count >= max_lines:
                truncated = True
                stop = Outcome.DONE
                break

        if eof:  # output closed: the tool is exiting; still bounded by the deadline and cancel
            while stop is None:
                try:
                    proc.wait(timeout=_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    if cancel is not None and cancel.is_set():
                        stop = Outcome.CANCELLED
                    elif time.monotonic() >= deadline:
                        stop = Outcome.TIMEOUT
    except BaseException:  # Ctrl-C in gputui: the tool (its own session) would live on,
        _kill_group(proc, grace_s)  # holding its target stopped; it detaches first
        out.close()
        raise
    if stop is not None or proc.poll() is None:
        _kill_group(proc, grace_s)
    # What the tool wrote while it was being stopped (gdb's "detached" line) still counts,
    # but a line bound already reached stays reached.
    th.join(timeout=1.0)
    while not (max_lines and count >= max_lines):
        try:
            item = q.get_nowait()
        except queue.Empty:
            break
        if item is None:
            break
        take(item)
    out.close()
    elapsed = time.monotonic() - start
    rc = proc.returncode

    if stop is Outcome.TIMEOUT:
        outcome, msg = Outcome.TIMEOUT, f"no result within {timeout:g} s; stopped it"
    elif stop is Outcome.CANCELLED:
        outcome, msg = Outcome.CANCELLED, "stopped by the user"
    elif stop is Outcome.DONE:
        outcome, msg = Outcome.DONE, f"stopped after {count} lines"
    elif rc == 0:
        outcome, msg = Outcome.DONE, ""
    else:
        last = next((ln.strip() for ln in reversed(lines) if ln.strip()), "")
        outcome = Outcome.FAILED
        msg = f"exited with status {rc}" + (f": {last}" if last else "")
    return ToolResult(
        tool=name,
        pid=pid,
        outcome=outcome,
        message=msg,
        lines=tuple(lines),
        elapsed_s=elapsed,
        exit_code=rc,
        truncated=truncated,
        argv=tuple(argv),
    )
