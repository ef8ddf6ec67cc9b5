"""py-spy's `dump --json`, written as its text dump: the fallback for a process py-spy cannot
print.

py-spy 0.4's text dump starts with the target's command line and fails on it when it is not
UTF-8 ("Error: Failed to convert utf8 invalid utf-8 sequence ..."), before any thread is
written: a rank started with a Latin-1 file name in its argv would lose every frame, and the
automatic dump the culprit's line. `dump --json` has no such header and succeeds on the same
process. Its threads are written here in the text dump's own shape (`Thread TID (active+gil):
"name"`, then `    function (file.py:line)`), so every reader of a dump (threads, stacks,
the culprit's line) reads it unchanged.
"""

from __future__ import annotations

import json
from typing import Any

# What py-spy's text dump fails with on a command line that is not UTF-8.
NOT_UTF8 = "Failed to convert utf8"


def needs_json(text: str) -> bool:
    """True when a failed text dump failed on what its header prints, not on the process."""
    return NOT_UTF8 in text


def text_lines(pid: int, raw: str) -> list[str] | None:
    """The text dump's lines for `raw`, py-spy's JSON answer; None when it is not one (cut
    short, or a message in its place)."""
    try:
        threads = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(threads, list) or not all(isinstance(t, dict) for t in threads):
        return None
    lines = [f"Process {pid}: (its command line is not UTF-8: py-spy dump --json read it)", ""]
    for t in threads:
        lines.append(_thread_line(t))
        for f in t.get("frames") or ():
            if isinstance(f, dict):
                lines.append(_frame_line(f))
    return lines


def _thread_line(t: dict[str, Any]) -> str:
    """`Thread 2317 (active+gil): "stats"`, as py-spy's text dump says it: the OS thread id
    where known (else the Python thread id in hex), the status from (active, owns_gil)."""
    tid = t.get("os_thread_id")
    ident = str(tid) if isinstance(tid, int) else f"{int(t.get('thread_id') or 0):#X}"
    active, gil = bool(t.get("active")), bool(t.get("owns_gil"))
    status = "idle" if not active else ("active+gil" if gil else "active")
    name = t.get("thread_name")
    return f'Thread {ident} ({status}): "{name}"' if name else f"Thread {ident} ({status})"


def _frame_line(f: dict[str, Any]) -> str:
    """`    parse_record (train.py:13)`; a native frame without a line number has no `:0`."""
    where = f.get("short_filename") or f.get("filename") or "?"
    line = f.get("line")
    at = f"{where}:{line}" if isinstance(line, int) and line else str(where)
    return f"    {f.get('name') or '?'} ({at})"
