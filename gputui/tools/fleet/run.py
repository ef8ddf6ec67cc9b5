"""Run gputui on many hosts at once: ssh (default), srun or pdsh, every host bounded.

`gputui fleet HOSTS -- check ...` is the one-liner for a job that spans nodes: each host
runs `gputui check --json`, and the lines are merged into one job-wide verdict. The cluster's
own launchers do the reaching; gputui adds bounds: `-o BatchMode=yes` (never a password
prompt), `-o ConnectTimeout`, a run time per host enforced here by killing the ssh process
group, and at most `fanout` hosts at once. A host that refuses, fails or times out is
*silent*, reported with the reason, and never waited on past its bound.

The remote command line is a shell string on the remote side (ssh joins its arguments), so
every argument is quoted with shlex.quote; `{host}` in an argument is replaced by the host's
name (e.g. `--replay /shared/rec/{host}.jsonl.gz`).

What a host sends back is untrusted, and bounded by the deadline the user gave (issue 34: a
host printing check lines forever cost 1.8 GB and 30 s despite `--timeout 5`):

- bytes: a host's stdout is read up to MAX_OUTPUT; past it (or past that much stderr) its
  command is killed at once, and what came is used, its last partial line dropped;
- lines: at most MAX_LINES of it are kept;
- time: the whole fan-out shares one deadline (`deadline`, monotonic): a host's run is
  bounded by its `timeout` and by the time left, and a host not started before the deadline
  is silent, saying so;
- words: the last stderr line of a failing host, which `error` quotes, has its secrets
  redacted (gputui.redact) and its control characters escaped (gputui.textsafe).
"""

from __future__ import annotations

import math
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gputui.collect import subproc
from gputui.redact import redact_text
from gputui.textsafe import clean
from gputui.tools.fleet.ssh import ssh_argv

MAX_OUTPUT = 4 << 20
"""Bytes of stdout read from one host. A `check --json` line is 1-100 KiB (stacks of 256
ranks), and check prints one when the verdict changes: a day of a flapping job is well
under this. A host that sends more is cut here and killed."""
MAX_LINES = 10_000
"""Lines of one host's output kept: more verdict changes than a day-long check prints."""
SSH_FAILED = 255  # ssh's own exit status: no connection, authentication, host key


@dataclass(frozen=True)
class HostRun:
    """What one host (or one launcher run) gave back."""

    host: str
    outcome: str  # done | refused | timeout | failed | cancelled
    rc: int | None
    stdout: str
    error: str | None  # one line: why the host is silent
    seconds: float


def remote_args(args: Sequence[str], host: str) -> list[str]:
    return [a.replace("{host}", host) for a in args]


def remote_command(remote_gputui: str, args: Sequence[str], host: str) -> str:
    """The shell string the remote side runs, every word quoted."""
    return shlex.join([remote_gputui, *remote_args(args, host)])


def pdsh_argv(
    hosts: Sequence[str], command: str, *, fanout: int, connect_timeout: float, timeout: float
) -> list[str]:
    """pdsh runs the command on every host through ssh and prefixes each line `host: `."""
    return [
        "pdsh", "-R", "ssh", "-S",
        "-f", str(fanout),
        "-t", str(math.ceil(connect_timeout)),
        "-u", str(math.ceil(timeout)),
        "-w", ",".join(hosts),
        command,
    ]  # fmt: skip


def srun_argv(
    hosts: Sequence[str], remote: Sequence[str], *, jobid: str | None, timeout: float
) -> list[str]:
    """One task per node, inside the job's allocation (--overlap: beside its running steps)."""
    argv = ["srun", "--overlap", "-N", str(len(hosts)), "--ntasks-per-node=1"]
    argv += ["-w", ",".join(hosts), f"--time={max(1, math.ceil(timeout / 60))}"]
    if jobid:
        argv += ["--jobid", jobid]
    return [*argv, *remote]


def run_bounded(
    argv: list[str], timeout: float, cancel: threading.Event, env: dict[str, str] | None = None
) -> tuple[str, int | None, str, str, float]:
    """(outcome, rc, stdout, stderr, seconds): the process group is killed past `timeout`,
    or once it has written more than MAX_OUTPUT (outcome too_much)."""
    return subproc.run_bounded(
        argv, timeout=timeout, cancel=cancel, env=env, max_stdout=MAX_OUTPUT, kill_past=MAX_OUTPUT
    )


def said(text: str) -> str:
    """A host's own words (an error line it printed), safe to show: secrets redacted, control
    characters escaped, at most 300 characters.

    Args:
        text: what a host printed.

    Returns:
        The text, redacted, sanitized and cut to 300 characters.
    """
    return clean(redact_text(text), limit=300)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return said(lines[-1][:1000]) if lines else ""


def bounded_lines(stdout: str, cut: bool = False) -> tuple[str, str | None]:
    """(at most MAX_LINES lines of `stdout`, why it was cut or None). `cut`: the output was
    stopped mid-stream (past MAX_OUTPUT), so its last line, if it has no end, is dropped."""
    lines = stdout.splitlines(keepends=True)
    if cut and lines and not lines[-1].endswith("\n"):
        lines.pop()
    many = len(lines) > MAX_LINES
    if many:
        lines = lines[:MAX_LINES]
    why = None
    if cut:
        why = f"sent more than {MAX_OUTPUT >> 20} MiB: stopped there"
        why += f"; the first {MAX_LINES} lines are read" if many else ""
    elif many:
        why = f"sent more than {MAX_LINES} lines: the first {MAX_LINES} are read"
    return "".join(lines), why


def left(deadline: float | None, timeout: float) -> float:
    """Seconds a run may take: its own timeout, or less when the fan-out's deadline is near."""
    if deadline is None:
        return timeout
    return min(timeout, deadline - time.monotonic())


def not_started(host: str, timeout: float) -> HostRun:
    why = f"not started: the fan-out's --timeout ({timeout:g} s) ran out (raise --fanout)"
    return HostRun(host, "timeout", None, "", why, 0.0)


def classify(
    host: str, outcome: str, rc: int | None, stdout: str, stderr: str, secs: float, timeout: float
) -> HostRun:
    """A host's run, with the reason it is silent when it is. Its output is bounded
    (bounded_lines) and its words made safe (said)."""
    stdout, cut = bounded_lines(stdout, cut=outcome == "too_much")
    if outcome == "timeout":
        return HostRun(host, "timeout", rc, stdout, f"no result within {timeout:g} s", secs)
    if outcome == "too_much" or (cut and outcome == "done"):
        return HostRun(host, "cut", rc, stdout, cut, secs)
    if outcome != "done":
        return HostRun(host, outcome, rc, stdout, _last_line(stderr) or outcome, secs)
    if rc == SSH_FAILED:
        why = _last_line(stderr) or "ssh failed"
        return HostRun(host, "refused", rc, stdout, why, secs)
    if rc not in (0, 1):
        why = _last_line(stderr) or f"exit status {rc}"
        return HostRun(host, "failed", rc, stdout, why, secs)
    return HostRun(host, "done", rc, stdout, None, secs)


def run_ssh(
    hosts: Sequence[str],
    command_for: Callable[[str], str],
    *,
    fanout: int = 64,
    timeout: float = 60.0,
    connect_timeout: float = 10.0,
    options: Sequence[str] = (),
    config: str | None = None,
    cancel: threading.Event | None = None,
    deadline: float | None = None,
) -> list[HostRun]:
    """Run `command_for(host)` on every host through ssh, at most `fanout` at once, each
    within `timeout` and all before `deadline` (monotonic)."""
    cancel = cancel or threading.Event()

    def one(host: str) -> HostRun:
        if cancel.is_set():
            return HostRun(host, "cancelled", None, "", "cancelled", 0.0)
        limit = left(deadline, timeout)
        if limit <= 0:
            return not_started(host, timeout)
        argv = ssh_argv(
            host, command_for(host), connect_timeout=connect_timeout, options=options, config=config
        )
        return classify(host, *run_bounded(argv, limit, cancel), timeout=timeout)

    with ThreadPoolExecutor(max_workers=max(1, min(fanout, len(hosts)))) as pool:
        return list(pool.map(one, hosts))


def split_pdsh(stdout: str, hosts: Sequence[str]) -> dict[str, list[str]]:
    """pdsh's `host: line` output, per host (only the hosts asked for)."""
    wanted = set(hosts)
    out: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        host, sep, rest = line.partition(": ")
        if sep and host in wanted:
            out.setdefault(host, []).append(rest)
    return out
