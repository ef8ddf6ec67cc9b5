"""`gputui probe --hosts LIST`: the whole world's communication, checked from one command.

Options (added to `probe` by `add_world_options`) mirror `gputui fleet`'s: the same host
lists, launchers (ssh, srun, pdsh) and ssh options. `--host-timeout` bounds each host (probe's
`--timeout` stays the per-pair bound of the intra-node probe). Exit status: 0 every host and
link passed; 1 a host or link failed (or hung, or left something running, since killed);
2 usage or error (bad host list, launcher missing), before anything ran.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading

from gputui.commands.common import positive_float
from gputui.diagnose import exitcodes
from gputui.errors import GputuiError

LAUNCHERS = ("ssh", "srun", "pdsh", "local")


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65000:
        raise argparse.ArgumentTypeError(f"must be a port 1 to 65000: {text!r}")
    return int(text)


def _count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"must be 1 to 64: {text!r}")
    return int(text)


def add_world_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("across hosts (gputui probe --hosts LIST)")
    g.add_argument(
        "--hosts",
        metavar="LIST",
        default=None,
        help="probe the whole world over these hosts: node[01-16], a,b,c or @file",
    )
    g.add_argument(
        "--launcher",
        choices=LAUNCHERS,
        default="ssh",
        help="how to reach the hosts (default ssh; local: every host is this machine, for testing)",
    )
    g.add_argument("--ssh-config", metavar="FILE", default=None, help="ssh -F FILE")
    g.add_argument(
        "--ssh-option",
        action="append",
        default=[],
        metavar="OPT",
        help="an ssh -o option (repeatable)",
    )
    g.add_argument(
        "--remote-gputui",
        default="gputui",
        metavar="PATH",
        help="gputui on the hosts (default: gputui on their PATH)",
    )
    g.add_argument(
        "--host-timeout",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="seconds allowed per host and world, rendezvous included (default 60)",
    )
    g.add_argument(
        "--connect-timeout",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="ssh ConnectTimeout (default 10)",
    )
    g.add_argument(
        "--port",
        type=_port,
        default=29500,
        metavar="P",
        help="rendezvous port on the first host (default 29500; bisect uses P+1...)",
    )
    g.add_argument(
        "--gpus-per-host",
        type=_count,
        default=None,
        metavar="N",
        help="ranks per host (default: one per GPU; one gloo rank on a host without)",
    )
    g.add_argument(
        "--bisect",
        action="store_true",
        help="test each host alone and every host pair even when the world passes",
    )
    g.add_argument(
        "--force",
        action="store_true",
        help="run on GPUs that a job is using (refused otherwise, naming the job)",
    )
    g.add_argument("--jobid", default=None, metavar="J", help="srun --jobid J")
    g.add_argument("--world-worker", default=None, help=argparse.SUPPRESS)
    g.add_argument("--world-reap", default=None, help=argparse.SUPPRESS)


def require_launcher(launcher: str, said: str) -> None:
    """GputuiError (one line, exit 2, `said` first) when the launcher is not installed."""
    if launcher != "local" and shutil.which(launcher) is None:
        raise GputuiError(f"{said}: the launcher {launcher} is not installed")


def _options(args: argparse.Namespace):
    from gputui.probe.world.model import WorldOptions

    if args.gpus is not None or args.cpu is not None:
        raise GputuiError("probe --hosts: --gpus and --cpu are for one node; use --gpus-per-host")
    require_launcher(args.launcher, "probe --hosts")
    opts = WorldOptions(
        launcher=args.launcher,
        remote_gputui=args.remote_gputui,
        ssh_config=args.ssh_config,
        ssh_options=tuple(args.ssh_option),
        connect_timeout=args.connect_timeout,
        host_timeout=args.host_timeout,
        port=args.port,
        gpus_per_host=args.gpus_per_host,
        backend=args.backend or "auto",
        iters=5,
        force=args.force,
        jobid=args.jobid,
        pair_timeout=args.timeout,
    )
    if args.size:
        opts.sizes = opts.gloo_sizes = (args.size,)
    return opts


def run_hosts(args: argparse.Namespace) -> int:
    """Ctrl-C or SIGTERM stops every launch in flight at once (their process groups killed;
    under ssh the workers see their stdin close and kill their ranks), then exits 130."""
    import signal

    from gputui.probe.world.launch import STOP

    def on_signal(signum: int, frame: object) -> None:
        STOP.set()
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return _run_hosts(args)
    saved = signal.signal(signal.SIGINT, on_signal), signal.signal(signal.SIGTERM, on_signal)
    try:
        return _run_hosts(args)
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])


def _run_hosts(args: argparse.Namespace) -> int:
    from gputui.collect.hostlist import hosts_option
    from gputui.probe.world.check import check_world
    from gputui.probe.world.report import json_lines, text

    hosts = hosts_option(args.hosts, "probe --hosts")
    opts = _options(args)
    show = not args.json and sys.stderr.isatty()

    def stage(what: str) -> None:
        if show:
            print(what, file=sys.stderr)

    rep = check_world(hosts, opts, bisect=args.bisect, on_stage=stage)
    code = exitcodes.OK if rep.ok else exitcodes.HANG  # 1: a host or link is broken
    lines = json_lines(rep, code)
    if args.out is not None:
        try:
            args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        except OSError as e:
            print(f"gputui: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
    if args.json:
        for line in lines:
            print(line, flush=True)
    else:
        print(text(rep))
    return code


def run_hidden(args: argparse.Namespace) -> int | None:
    """The remote halves (`--world-worker SPEC`, `--world-reap TOKEN`), or None."""
    if args.world_worker is not None:
        from gputui.probe.world.worker import main

        return main(args.world_worker)
    if args.world_reap is not None:
        from gputui.probe.world.reap import reap

        return reap(args.world_reap)
    return None
