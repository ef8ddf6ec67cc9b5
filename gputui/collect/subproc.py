"""Run one external program to its end, bounded: a time limit, a cancel event, its whole
process group killed past either, and its output read back from temporary files.

For the programs gputui runs to completion and reads afterwards (PyTorch's flight-recorder
analyzer, `ssh`/`srun`/`pdsh` for a fleet). The attach tools, whose output is streamed line
by line while they run, use gputui.tools.runner instead. Output goes to files, not pipes, so a
program that writes a lot can never block on a full pipe that nobody reads.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

POLL_S = 0.1  # how often the time limit and the cancel event are looked at
POLL_CAPPED_S = 0.02  # and the output's size, when it is capped (kill_past)


def run_bounded(
    argv: Sequence[str],
    *,
    timeout: float,
    cancel: threading.Event,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    merge_stderr: bool = False,
    uid: int | None = None,
    gid: int | None = None,
    max_stdout: int = 8 << 20,
    max_stderr: int = 64 << 10,
    kill_past: int | None = None,
) -> tuple[str, int | None, str, str, float]:
    """(outcome, exit status, stdout, stderr, seconds); outcome is done, timeout, cancelled,
    too_much or failed (it could not start). `uid`/`gid`: run as that user when gputui is
    root (the analyzer runs the job's own Python, which must not run as root for it).

    `kill_past`: the program is killed (outcome too_much) as soon as its stdout or stderr
    holds more than this many bytes: a remote host that prints forever costs that much disk
    and the time to write it, not its whole time limit (looked at every POLL_CAPPED_S)."""
    start = time.monotonic()
    kw: dict[str, Any] = {}
    if os.geteuid() == 0 and uid not in (None, 0):
        kw = {"user": uid, "group": gid if gid is not None else uid, "extra_groups": []}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(  # noqa: S603 - an argument list built by the caller
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT if merge_stderr else err,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                **kw,
            )
        except OSError as e:
            return "failed", None, "", f"cannot start {argv[0]}: {e.strerror or e}", 0.0
        outcome = "done"
        poll = POLL_S if kill_past is None else POLL_CAPPED_S
        while True:
            try:
                proc.wait(timeout=poll)
                break
            except subprocess.TimeoutExpired:
                pass
            if cancel.is_set() or time.monotonic() - start > timeout:
                outcome = "cancelled" if cancel.is_set() else "timeout"
            elif kill_past is not None and _larger(kill_past, out, err):
                outcome = "too_much"
            else:
                continue
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        out.seek(0)
        err.seek(0)
        stdout = out.read(max_stdout).decode("utf-8", errors="replace")
        stderr = err.read(max_stderr).decode("utf-8", errors="replace")
    return outcome, proc.returncode, stdout, stderr, round(time.monotonic() - start, 3)


def _larger(limit: int, *files: Any) -> bool:
    return any(os.fstat(f.fileno()).st_size > limit for f in files)
