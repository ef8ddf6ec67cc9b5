"""How the world probe reaches a host: ssh, srun, pdsh (its exec module) or `local`.

Every launch is an argument list, bounded in time; past its bound the launcher's process group
is killed. ssh and `local` get a stdin pipe that this side holds open: when the launch is
killed or this process dies, the worker on the host sees EOF and kills its own ranks.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.collect import subproc
from gputui.tools.fleet import run as fleet
from gputui.tools.fleet.ssh import ssh_argv

if TYPE_CHECKING:
    from gputui.probe.world.model import WorldOptions

MAX_EVENTS_OUT = 8 << 20
STOP = threading.Event()
"""Set on Ctrl-C or SIGTERM: every launch in flight kills its process group within a poll,
so the command ends at once instead of when the last host's bound runs out."""
Outcome = tuple[str, "int | None", str, str, float]  # as subproc.run_bounded


def _local_argv(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The worker as a child of this Python (the `local` launcher), gputui importable."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return [sys.executable, "-m", "gputui", *args], env


def _ssh_argv(host: str, args: list[str], opts: WorldOptions) -> list[str]:
    """`gputui ARGS` on `host` through ssh, with the user's ssh options (gputui.tools.fleet.ssh).
    The remote side runs one shell string, so every word is quoted."""
    return ssh_argv(
        host,
        shlex.join([opts.remote_gputui, *args]),
        connect_timeout=opts.connect_timeout,
        options=opts.ssh_options,
        config=opts.ssh_config,
    )


def _launch_one(
    host: str, args: list[str], opts: WorldOptions, cancel: threading.Event
) -> fleet.HostRun:
    bound = opts.host_timeout + opts.connect_timeout + 5.0
    if opts.launcher == "local":
        argv, env = _local_argv(args)
        return fleet.classify(host, *_run(argv, bound, cancel, env, stdin=True), timeout=bound)
    if opts.launcher == "ssh":
        argv = _ssh_argv(host, args, opts)
        return fleet.classify(host, *_run(argv, bound, cancel, None, stdin=True), timeout=bound)
    raise ValueError(opts.launcher)


def _run(argv: list[str], timeout: float, cancel: threading.Event, env, *, stdin: bool) -> Outcome:
    """subproc.run_bounded, but with stdin a pipe held open: its EOF tells the worker to stop."""
    if not stdin:
        return subproc.run_bounded(
            argv, timeout=timeout, cancel=cancel, env=env, max_stdout=MAX_EVENTS_OUT
        )
    r, w = os.pipe()
    try:
        return _run_with_stdin(argv, timeout, cancel, env, r)
    finally:
        os.close(w)


def _run_with_stdin(argv, timeout, cancel, env, stdin_fd: int) -> Outcome:
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(  # noqa: S603 - an argument list
                argv, stdin=stdin_fd, stdout=out, stderr=err, env=env, start_new_session=True
            )
        except OSError as e:
            os.close(stdin_fd)
            return "failed", None, "", f"cannot start {argv[0]}: {e.strerror or e}", 0.0
        os.close(stdin_fd)
        outcome = "done"
        while True:
            try:
                proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                pass
            if cancel.is_set() or STOP.is_set() or time.monotonic() - start > timeout:
                outcome = "timeout" if time.monotonic() - start > timeout else "cancelled"
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait()
                break
        secs = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        text = out.read(MAX_EVENTS_OUT).decode("utf-8", "replace")
        etext = err.read(64 << 10).decode("utf-8", "replace")
    return outcome, proc.returncode, text, etext, secs


def pdsh_exec_argv(hosts: list[str], args: list[str], opts: WorldOptions, timeout: float):
    """pdsh's exec module: it runs `ssh ... %h CMD` per host and puts the host's own name
    wherever `%h` appears, so each worker knows which host of the list it is."""
    ssh = _ssh_argv("%h", args, opts)
    return ["pdsh", "-R", "exec", "-S", "-f", str(opts.fanout), "-u", str(math.ceil(timeout)),
            "-w", ",".join(hosts), *ssh]  # fmt: skip


def run_on_host(host: str, args: list[str], opts: WorldOptions, timeout: float) -> Outcome:
    """Run `gputui ARGS` on one host through the launcher, bounded: (outcome, rc, out, err, s).
    For the bisect's node probe and the cleanup check (plain output, no world)."""
    cancel = STOP  # nothing else cancels a single call
    env = None
    if opts.launcher == "local":
        argv, env = _local_argv(args)
    elif opts.launcher == "ssh":
        argv = _ssh_argv(host, args, opts)
    elif opts.launcher == "srun":
        argv = fleet.srun_argv(
            [host], [opts.remote_gputui, *args], jobid=opts.jobid, timeout=timeout
        )
    else:
        argv = pdsh_exec_argv([host], args, opts, timeout)
    res = subproc.run_bounded(
        argv,
        timeout=timeout + opts.connect_timeout,
        cancel=cancel,
        env=env,
        max_stdout=MAX_EVENTS_OUT,
    )
    if opts.launcher == "pdsh":
        res = (
            res[0],
            res[1],
            "\n".join(fleet.split_pdsh(res[2], [host]).get(host, [])),
            res[3],
            res[4],
        )
    return res


def _launch_all(hosts, args_for, opts: WorldOptions, cancel) -> list[fleet.HostRun]:
    """srun or pdsh: one launcher run for every host, split back per host."""
    import shutil

    tool = opts.launcher
    if shutil.which(tool) is None:
        return [
            fleet.HostRun(h, "failed", None, "", f"{tool} is not installed", 0.0) for h in hosts
        ]
    bound = opts.host_timeout + opts.connect_timeout + 5.0
    args = args_for(None)
    env = None
    if tool == "pdsh":
        argv = pdsh_exec_argv(hosts, args, opts, bound)
    else:
        argv = fleet.srun_argv(hosts, [opts.remote_gputui, *args], jobid=opts.jobid, timeout=bound)
    outcome, rc, out, err, secs = _run(argv, bound, cancel, env, stdin=False)
    per_host = fleet.split_pdsh(out, hosts) if tool == "pdsh" else _split_events(out, hosts)
    runs = []
    for h in hosts:
        lines = per_host.get(h, [])
        why = next((ln.strip() for ln in reversed(err.splitlines()) if f"{h}:" in ln), None)
        runs.append(
            fleet.HostRun(
                h,
                outcome,
                rc,
                "\n".join(lines),
                None if lines else (why or f"no output through {tool}"),
                secs,
            )
        )
    return runs


def _split_events(out: str, hosts: list[str]) -> dict[str, list[str]]:
    """srun: the workers' lines interleave unprefixed; each event carries its host's index."""
    per: dict[str, list[str]] = {}
    for line in out.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        i = ev.get("i") if isinstance(ev, dict) else None
        if isinstance(i, int) and 0 <= i < len(hosts):
            per.setdefault(hosts[i], []).append(line)
    return per
