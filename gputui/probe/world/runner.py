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
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from gputui.collect import subproc
from gputui.probe.world.launch import STOP, _launch_all, _launch_one
from gputui.probe.world.model import WorldOptions, WorldRun
from gputui.tools.fleet import run as fleet
from gputui.tools.fleet.ssh import config_argv

FAULT_ENV = "GPUTUI_WORLD_FAULT"
"""Test-only: `HOST:KIND` (kill: the host's first rank dies after joining; hang: it blocks;
exit: the host worker exits before joining). Read here and passed in that host's spec, so it
reaches the host through any launcher."""
HOSTID_ENV = "GPUTUI_WORLD_HOSTID"
"""Test-only: when 1, every host's ranks get NCCL_HOSTID=<its name in the list>, so aliases of
one machine (loopback ssh on a GPU node) count as separate hosts for NCCL. The `local`
launcher always does this: there every host is this machine."""
GRACE_S = 3.0  # after one host failed early: time the others get to say why, then stopped


def resolve_address(host: str, opts: WorldOptions) -> str:
    """The address the other hosts use to reach `host`: ssh's HostName for an alias (pdsh
    reaches hosts through ssh too); the name itself under srun."""
    if opts.launcher == "local":
        return "127.0.0.1"
    if opts.launcher == "srun":
        return host
    argv = config_argv(host, options=opts.ssh_options, config=opts.ssh_config)
    outcome, rc, out, _err, _s = subproc.run_bounded(
        argv, timeout=10.0, cancel=STOP, max_stdout=1 << 20
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


def run_world(
    hosts: list[str], opts: WorldOptions, *, port: int | None = None, master: str | None = None
) -> WorldRun:
    """One world over `hosts`; never raises for a failing host, never waits past the bounds."""
    from gputui.probe.world.parse import host_result

    start = time.monotonic()
    port = port or opts.port
    master = master or resolve_address(hosts[0], opts)
    cancel = threading.Event()
    if opts.launcher in ("srun", "pdsh"):
        cancel = STOP  # one launcher run for all: only Ctrl-C stops it early
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
