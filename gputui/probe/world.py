"""The parent side of the world probe: start one host worker per host, read what each said.

`run_world(hosts, opts)` launches `gputui probe --world-worker SPEC` on every host through the
launcher (ssh per host with BatchMode and ConnectTimeout, srun or pdsh once for all, or
`local`: every host is this machine, for tests and the GPU check). Each launch is bounded by
`--host-timeout` (+ connect time), enforced by killing the launcher's process group; under ssh
that closes the worker's stdin, and the worker's watchdog then kills its ranks. When one host
fails before the world could form, the others are stopped after a short grace instead of
waiting out the rendezvous: the failing host is named at once.

The rendezvous address is the first host as the hosts see it: `ssh -G HOST`'s hostname for
an ssh alias, the name itself for srun and pdsh.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.collect import subproc
from gputui.tools import fleet

FAULT_ENV = "GPUTUI_WORLD_FAULT"
"""Test-only: `HOST:KIND` (kill: the host's first rank dies after joining; hang: it blocks;
exit: the host worker exits before joining). Read here and passed in that host's spec, so it
reaches the host through any launcher."""
HOSTID_ENV = "GPUTUI_WORLD_HOSTID"
"""Test-only: when 1, every host's ranks get NCCL_HOSTID=<its name in the list>, so aliases of
one machine (loopback ssh on a GPU node) count as separate hosts for NCCL. The `local`
launcher always does this: there every host is this machine."""
GRACE_S = 3.0  # after one host failed early: time the others get to say why, then stopped
MAX_EVENTS_OUT = 8 << 20
Outcome = tuple[str, "int | None", str, str, float]  # as subproc.run_bounded


@dataclass
class WorldOptions:
    launcher: str = "ssh"
    remote_gputui: str = "gputui"
    ssh_config: str | None = None
    ssh_options: Sequence[str] = ()
    connect_timeout: float = 10.0
    host_timeout: float = 60.0
    port: int = 29500
    gpus_per_host: int | None = None
    backend: str = "auto"  # auto: nccl where every host has GPUs, else gloo
    sizes: Sequence[int] = (1 << 20, 16 << 20, 64 << 20)  # GPU worlds (NCCL)
    gloo_sizes: Sequence[int] = (
        1 << 16,
        1 << 20,
    )  # CPU worlds: small, or it costs more than it tells
    iters: int = 5
    force: bool = False
    pair_timeout: float = 30.0  # the node probe's per-pair bound (probe --timeout), in bisect
    fanout: int = 64
    jobid: str | None = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    @property
    def rdzv_timeout(self) -> float:
        return max(5.0, min(30.0, self.host_timeout / 3))

    @property
    def pg_timeout(self) -> float:
        return max(5.0, self.host_timeout / 2)


@dataclass
class HostResult:
    """One host in one world: what it said, or why it said nothing."""

    host: str
    ok: bool = False
    stage: str = "launch"  # launch | torch | busy | rendezvous | ranks | done | stopped
    why: str | None = None
    victim: bool = False  # failed only because another host did (waited for it, stopped)
    ranks: int = 0
    gpus: int = 0
    base: int | None = None
    backend: str | None = None
    joined_s: float | None = None
    wall_s: float = 0.0
    torch: str | None = None
    nccl_version: str | None = None
    rank_results: list[dict[str, Any]] = field(default_factory=list)
    nccl: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


@dataclass
class WorldRun:
    hosts: list[str]
    master: str
    port: int
    results: list[HostResult]
    wall_s: float

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.ok for r in self.results)

    @property
    def size(self) -> int:
        return sum(r.ranks for r in self.results)

    def busbw(self) -> list[dict[str, Any]]:
        """Per size: the slowest rank's bus bandwidth (the world is as fast as its slowest)."""
        sizes: dict[int, list[float]] = {}
        for r in self.results:
            for rr in r.rank_results:
                for s in rr.get("sizes", []):
                    if s.get("busbw_gbps") is not None:
                        sizes.setdefault(s["bytes"], []).append(s["busbw_gbps"])
        return [
            {"bytes": b, "busbw_gbps": min(v), "max_gbps": max(v)} for b, v in sorted(sizes.items())
        ]

    def failed(self) -> list[HostResult]:
        return [r for r in self.results if not r.ok]


def resolve_address(host: str, opts: WorldOptions) -> str:
    """The address the other hosts use to reach `host`: ssh's HostName for an alias (pdsh
    reaches hosts through ssh too); the name itself under srun."""
    if opts.launcher == "local":
        return "127.0.0.1"
    if opts.launcher == "srun":
        return host
    argv = ["ssh", "-G"] + (["-F", opts.ssh_config] if opts.ssh_config else [])
    for o in opts.ssh_options:
        argv += ["-o", o]
    outcome, rc, out, _err, _s = subproc.run_bounded(
        [*argv, "--", host], timeout=10.0, cancel=threading.Event(), max_stdout=1 << 20
    )
    if outcome == "done" and rc == 0:
        for line in out.splitlines():
            k, _, v = line.partition(" ")
            if k == "hostname" and v.strip():
                return v.strip()
    return host


def spec_for(hosts: list[str], i: int | None, master: str, port: int, opts: WorldOptions) -> dict:
    fault_host, _, fault = os.environ.get(FAULT_ENV, "").partition(":")
    me = hosts[i] if i is not None else "%h" if opts.launcher == "pdsh" else None
    return {
        "token": opts.token,
        "hosts": hosts,
        "index": i,
        "name": me,
        "master": master,
        "port": port,
        "deadline": opts.host_timeout,
        "rdzv_timeout": opts.rdzv_timeout,
        "pg_timeout": opts.pg_timeout,
        "sizes": list(opts.sizes),
        "gloo_sizes": list(opts.gloo_sizes),
        "iters": opts.iters,
        "backend": opts.backend,
        "gpus_per_host": opts.gpus_per_host,
        "force": opts.force,
        "watch_stdin": opts.launcher in ("ssh", "local"),
        "fault_host": fault_host if fault and fault_host in hosts else None,
        "fault": fault or None,
        "hostid": _hostid(opts),
    }


def _hostid(opts: WorldOptions) -> bool:
    return opts.launcher == "local" or os.environ.get(HOSTID_ENV) == "1"


def worker_args(spec: dict) -> list[str]:
    return ["probe", "--world-worker", json.dumps(spec, separators=(",", ":"))]


def _local_argv(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The worker as a child of this Python (the `local` launcher), gputui importable."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return [sys.executable, "-m", "gputui", *args], env


def _launch_one(
    host: str, args: list[str], opts: WorldOptions, cancel: threading.Event
) -> fleet.HostRun:
    bound = opts.host_timeout + opts.connect_timeout + 5.0
    if opts.launcher == "local":
        argv, env = _local_argv(args)
        return fleet.classify(host, *_run(argv, bound, cancel, env, stdin=True), timeout=bound)
    if opts.launcher == "ssh":
        cmd = shlex.join([opts.remote_gputui, *args])  # a string on the remote side: quoted
        argv = fleet.ssh_argv(
            host,
            cmd,
            connect_timeout=opts.connect_timeout,
            options=opts.ssh_options,
            config=opts.ssh_config,
        )
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
    import subprocess
    import tempfile

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
            if cancel.is_set() or time.monotonic() - start > timeout:
                outcome = "cancelled" if cancel.is_set() else "timeout"
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
    ssh = fleet.ssh_argv(
        "%h",
        shlex.join([opts.remote_gputui, *args]),
        connect_timeout=opts.connect_timeout,
        options=opts.ssh_options,
        config=opts.ssh_config,
    )
    return ["pdsh", "-R", "exec", "-S", "-f", str(opts.fanout), "-u", str(math.ceil(timeout)),
            "-w", ",".join(hosts), *ssh]  # fmt: skip


def run_on_host(host: str, args: list[str], opts: WorldOptions, timeout: float) -> Outcome:
    """Run `gputui ARGS` on one host through the launcher, bounded: (outcome, rc, out, err, s).
    For the bisect's node probe and the cleanup check (plain output, no world)."""
    cancel = threading.Event()
    env = None
    if opts.launcher == "local":
        argv, env = _local_argv(args)
    elif opts.launcher == "ssh":
        cmd = shlex.join([opts.remote_gputui, *args])
        argv = fleet.ssh_argv(
            host,
            cmd,
            connect_timeout=opts.connect_timeout,
            options=opts.ssh_options,
            config=opts.ssh_config,
        )
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


def run_world(
    hosts: list[str], opts: WorldOptions, *, port: int | None = None, master: str | None = None
) -> WorldRun:
    """One world over `hosts`; never raises for a failing host, never waits past the bounds."""
    from gputui.probe.world_parse import host_result

    start = time.monotonic()
    port = port or opts.port
    master = master or resolve_address(hosts[0], opts)
    cancel = threading.Event()
    if opts.launcher in ("srun", "pdsh"):
        runs = _launch_all(
            hosts, lambda i: worker_args(spec_for(hosts, i, master, port, opts)), opts, cancel
        )
    else:
        runs = _fan_out(hosts, master, port, opts, cancel)
    results = [host_result(run, opts) for run in runs]
    return WorldRun(list(hosts), master, port, results, round(time.monotonic() - start, 3))


def _fan_out(hosts, master, port, opts: WorldOptions, cancel) -> list[fleet.HostRun]:
    """Every host at once; one that fails before the world formed stops the rest (after
    GRACE_S, so they can say what they saw)."""
    done: dict[str, fleet.HostRun] = {}
    lock = threading.Lock()
    failed_at: list[float] = []

    def one(i: int) -> fleet.HostRun:
        args = worker_args(spec_for(hosts, i, master, port, opts))
        run = _launch_one(hosts[i], args, opts, cancel)
        with lock:
            done[hosts[i]] = run
            if run.outcome != "done" or run.rc not in (0,):
                failed_at.append(time.monotonic())
        return run

    with ThreadPoolExecutor(max_workers=max(1, min(opts.fanout, len(hosts)))) as pool:
        futs = [pool.submit(one, i) for i in range(len(hosts))]
        while not all(f.done() for f in futs):
            if failed_at and time.monotonic() - failed_at[0] > GRACE_S:
                cancel.set()
            time.sleep(0.05)
        return [f.result() for f in futs]
