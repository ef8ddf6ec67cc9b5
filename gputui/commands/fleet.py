"""`gputui fleet HOSTS -- check|dump|snapshot ...`: run gputui on many hosts, merge the checks.

    gputui fleet node[01-64] -- check --duration 20
    gputui fleet --launcher srun --jobid 4242 node[01-64] -- check
    gputui fleet a,b -- dump --json 1234

With `check`, every host's `--json` lines are merged into the job-wide verdict (as
`gputui merge`); hosts that refuse, fail or time out are named silent with the reason. Other
commands print each host's lines prefixed `host: `, as pdsh does. Exit status with check: as
`merge`, the worst job-wide verdict seen over the span (a stall that ended exits 1); else 0/1
as the hosts' worst (a snapshot that sees a hang exits 1); 2 when no host answered.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, NoReturn

from gputui.commands.common import positive_float
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.probe.world.model import WorldOptions
    from gputui.tools.fleet.run import HostRun

REMOTE_COMMANDS = ("check", "dump", "snapshot")


def _fanout(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 4096:
        raise argparse.ArgumentTypeError(f"must be 1 to 4096: {text!r}")
    return int(text)


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--launcher",
        choices=("ssh", "srun", "pdsh", "kubectl"),
        default="ssh",
        help="how to reach the hosts (default ssh); kubectl: the hosts are pods",
    )
    p.add_argument(
        "--selector",
        default=None,
        metavar="SEL",
        help="kubectl: the pods matching this label selector (then HOSTS is left out)",
    )
    p.add_argument("--namespace", default=None, metavar="NS", help="kubectl: the pods' namespace")
    p.add_argument("--container", default=None, metavar="C", help="kubectl: the container")
    p.add_argument(
        "--fanout", type=_fanout, default=64, metavar="N", help="hosts at once (default 64)"
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="time allowed for the whole fan-out, connecting included (default 60): hosts "
        "beyond --fanout share it",
    )
    p.add_argument(
        "--connect-timeout",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="ssh ConnectTimeout (default 10)",
    )
    p.add_argument(
        "--remote-gputui",
        default="gputui",
        metavar="PATH",
        help="gputui on the hosts (default: gputui on their PATH)",
    )
    p.add_argument(
        "--ssh-option",
        action="append",
        default=[],
        metavar="OPT",
        help="an ssh -o option (repeatable), e.g. StrictHostKeyChecking=accept-new",
    )
    p.add_argument("--ssh-config", metavar="FILE", default=None, help="ssh -F FILE")
    p.add_argument("--jobid", default=None, metavar="J", help="srun --jobid J")
    p.add_argument("--json", action="store_true", help="merged verdict as JSON lines")
    from gputui.commands.merge_after import add_options

    add_options(p, launcher=False)
    p.add_argument(
        "--window",
        type=positive_float,
        default=2.0,
        metavar="S",
        help="merge: changes closer than S seconds form one step (default 2)",
    )


class _OptionParser(argparse.ArgumentParser):
    """The options written between HOSTS and `--`: errors as one line, exit 2."""

    def error(self, message: str) -> NoReturn:
        raise GputuiError(f"fleet: {message}")


def _epilog() -> str:
    from gputui.commands.merge import exit_epilog

    return exit_epilog() + (
        "\n(with check; with dump or snapshot: 1 when a host's command exited non-zero, a hang too)"
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fleet",
        help="run gputui check|dump on many hosts (ssh, srun, pdsh) and merge the checks",
        description=(
            "Run `gputui COMMAND` on every host (ssh with BatchMode, srun or pdsh), each "
            "bounded in time, at most --fanout at once. `check` results are merged into the "
            "job-wide verdict; a host that refuses or times out is named silent. `{host}` in "
            "an argument is replaced by the host's name. Options go before `--`."
        ),
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_options(p)
    p.add_argument("hosts", metavar="HOSTS", help="node[01-64], a,b,c or @file")
    p.add_argument(
        "remote",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND ...",
        help="the gputui command to run on each host: check, dump or snapshot",
    )
    p.set_defaults(func=run)


def _remote(args: argparse.Namespace) -> list[str]:
    """The remote command; fleet options written after HOSTS (before `--`) are read here."""
    remote = list(args.remote)
    if "--" in remote:
        cut = remote.index("--")
        if cut:
            opts = _OptionParser(prog="gputui fleet", add_help=False)
            _add_options(opts)
            given = opts.parse_args(remote[:cut])
            for k, v in vars(given).items():
                if v != opts.get_default(k):
                    setattr(args, k, v)
        remote = remote[cut + 1 :]
    if not remote:
        raise GputuiError("fleet: give the command to run after --, e.g. -- check")
    if remote[0] not in REMOTE_COMMANDS:
        raise GputuiError(f"fleet: runs {', '.join(REMOTE_COMMANDS)}, not {remote[0]!r}")
    if remote[0] == "check" and "--json" not in remote:
        remote.append("--json")
    return remote


def _targets(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(hosts or pods, the remote command). With kubectl and --selector, HOSTS is left out:
    argparse then takes the command's first word for HOSTS, which is put back here."""
    if args.selector is not None and args.launcher != "kubectl":
        raise GputuiError("fleet: --selector needs --launcher kubectl")
    if args.launcher == "kubectl" and args.selector is not None:
        if args.hosts not in REMOTE_COMMANDS and "--" not in args.remote:
            raise GputuiError("fleet: give pods as HOSTS or --selector, not both")
        if args.hosts in REMOTE_COMMANDS and "--" not in args.remote:
            args.remote = ["--", args.hosts, *args.remote]
        remote = _remote(args)
        from gputui.tools.fleet.kube import list_pods

        return list_pods(args.namespace, args.selector, args.connect_timeout + 10.0), remote
    from gputui.collect.hostlist import hosts_option

    return hosts_option(args.hosts, "fleet"), _remote(args)


GRACE_S = 2.0
"""The whole fan-out ends within --timeout and this: killing the last runs, reading and
merging what they sent (a host cut off at --timeout keeps the lines it sent)."""


def _runs(
    args: argparse.Namespace, hosts: list[str], remote: list[str], deadline: float
) -> list[HostRun]:
    """One HostRun per host, whatever the launcher, every one ended by `deadline`."""
    import os
    import time

    from gputui.tools.fleet import run as fleet

    if args.launcher == "kubectl":
        from gputui.tools.fleet.kube import run_kubectl

        if remote[0] == "check" and "--host" not in remote:
            remote = [*remote, "--host", "{host}"]
        return run_kubectl(
            hosts,
            [args.remote_gputui, *remote],
            namespace=args.namespace,
            container=args.container,
            fanout=args.fanout,
            timeout=args.timeout,
            deadline=deadline,
        )

    if args.launcher == "ssh":
        if remote[0] == "check" and "--host" not in remote:
            remote = [*remote, "--host", "{host}"]
        return fleet.run_ssh(
            hosts,
            lambda h: fleet.remote_command(args.remote_gputui, remote, h),
            fanout=args.fanout,
            timeout=args.timeout,
            connect_timeout=args.connect_timeout,
            options=args.ssh_option,
            config=args.ssh_config,
            deadline=deadline,
        )
    import threading

    bound = max(0.1, deadline - time.monotonic())
    if args.launcher == "pdsh":
        cmd = fleet.remote_command(args.remote_gputui, remote, "{host}")
        argv = fleet.pdsh_argv(
            hosts,
            cmd,
            fanout=args.fanout,
            connect_timeout=args.connect_timeout,
            timeout=args.timeout,
        )
        from gputui.tools.fleet.ssh import pdsh_append

        ssh = pdsh_append(options=args.ssh_option, config=args.ssh_config)
        env = {**os.environ, "PDSH_SSH_ARGS_APPEND": ssh}
    else:
        argv = fleet.srun_argv(
            hosts, [args.remote_gputui, *remote], jobid=args.jobid, timeout=args.timeout
        )
        env = None
    outcome, rc, out, err, secs = fleet.run_bounded(argv, bound, threading.Event(), env)
    if outcome == "failed" and rc is None:
        raise GputuiError(f"fleet: {fleet.said(err)}")
    out, _cut = fleet.bounded_lines(out, cut=outcome == "too_much")
    if args.launcher == "pdsh":
        per_host = fleet.split_pdsh(out, hosts)
    else:
        per_host = {h: [] for h in hosts}
        per_host["*"] = out.splitlines()  # srun: the lines name their host themselves
    runs = []
    for h in hosts:
        lines = per_host.get(h, [])
        why = next((ln.strip() for ln in reversed(err.splitlines()) if f"{h}:" in ln), None)
        why = fleet.said(why) if why is not None else None
        state = "done" if lines else "timeout" if outcome == "timeout" else "failed"
        runs.append(
            fleet.HostRun(
                h,
                state,
                rc,
                "\n".join(lines),
                None if lines else (why or f"no output through {args.launcher}"),
                secs,
            )
        )
    if "*" in per_host:
        runs.append(fleet.HostRun("*", "done", rc, "\n".join(per_host["*"]), None, secs))
    return runs


def run(args: argparse.Namespace) -> int:
    import sys
    import time

    from gputui.textsafe import clean
    from gputui.tools.fleet.run import said

    hosts, remote = _targets(args)
    if args.probe_blamed and remote[0] != "check":
        raise GputuiError("fleet: --probe-blamed follows a check (-- check ...)")
    world = _world_options(args)  # a launcher the probe lacks: said before anything runs
    deadline = time.monotonic() + args.timeout  # the whole fan-out's (GRACE_S after it)
    runs = _runs(args, hosts, remote, deadline)
    if remote[0] != "check":
        answered = [r for r in runs if r.stdout.strip()]
        for r in runs:
            if r.host != "*" and not r.stdout.strip():
                print(clean(f"gputui: {r.host}: silent ({r.outcome}: {said(r.error or '')})"),
                      file=sys.stderr)  # fmt: skip
        if not answered:
            raise GputuiError(f"fleet: none of the {len(hosts)} host(s) answered")
        for r in answered:
            for line in r.stdout.splitlines():
                print(clean(f"{r.host}: {line}" if r.host != "*" else line))  # a remote's text
        return 1 if any(r.rc not in (0, None) for r in answered) else 0
    return _merge(args, hosts, runs, sys.stderr, deadline + GRACE_S, world)


def _merge(
    args: argparse.Namespace,
    hosts: list[str],
    runs: list[HostRun],
    err: Any,
    deadline: float,
    world: WorldOptions | None,
) -> int:
    """Parse every host's check lines (a host cut off at its bound keeps what it said), each
    line bounded in depth and size (gputui.collect.capped), all before `deadline`."""
    import time
    from dataclasses import replace

    from gputui.collect.capped import loads_bounded
    from gputui.diagnose.merge.join import line_from_json, merge
    from gputui.textsafe import clean
    from gputui.tools.fleet.run import said

    lines = []
    answered: set[str] = set()
    unreadable: dict[str, tuple[int, str]] = {}  # host -> (lines, the first reason)
    late: set[str] = set()
    for r in runs:
        if time.monotonic() > deadline:
            late.add(r.host)
            continue
        prev = None
        for n, text in enumerate(r.stdout.splitlines(), 1):
            if text == prev or not text.strip():
                continue  # the same line again (a host repeating itself) costs nothing
            prev = text
            try:
                ln = line_from_json(loads_bounded(text), r.host)
            except ValueError as e:  # too deep (no RecursionError), not JSON, a bad key
                count, why = unreadable.get(r.host, (0, f"line {n}: {e}"))
                unreadable[r.host] = (count + 1, why)
                continue
            if r.host != "*" and args.launcher == "pdsh":
                ln = replace(ln, host=r.host)  # the name it was reached by
            lines.append(ln)
            answered.add(ln.host)
    for r in runs:
        if r.host == "*":
            continue
        bad = unreadable.get(r.host)
        if r.host in late:
            print(clean(f"gputui: {r.host}: not read: the fan-out ran out of time"), file=err)
        elif r.host not in answered:
            why = said(r.error or "") or "no check lines"
            if bad is not None:
                why = f"unreadable output ({said(bad[1])})"
            print(clean(f"gputui: {r.host}: silent ({r.outcome}: {why})"), file=err)
        elif r.outcome != "done":
            print(
                clean(
                    f"gputui: {r.host}: cut off ({said(r.error or '')}); its lines so far are used"
                ),
                file=err,
            )
        elif bad is not None:
            print(
                clean(f"gputui: {r.host}: {bad[0]} unreadable line(s) skipped ({said(bad[1])})"),
                file=err,
            )
    if not lines:
        raise GputuiError(f"fleet: none of the {len(hosts)} host(s) sent check lines")
    steps = merge(lines, expect=hosts, window=args.window)
    from gputui.commands.merge import report
    from gputui.diagnose.merge.join import exit_code  # the worst verdict seen, as `check` exits

    return report(steps, exit_code(steps), args.json, world)


def _world_options(args: argparse.Namespace) -> WorldOptions | None:
    """--probe-blamed: the world probe reaches the hosts as the check did (None without it)."""
    if not args.probe_blamed:
        return None
    from gputui.commands.merge_after import world_options

    return world_options(
        args.launcher,
        timeout=args.timeout,
        port=args.probe_port,
        remote_gputui=args.remote_gputui,
        ssh_config=args.ssh_config,
        ssh_options=tuple(args.ssh_option),
        connect_timeout=args.connect_timeout,
        jobid=args.jobid,
    )
