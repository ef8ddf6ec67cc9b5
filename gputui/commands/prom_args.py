"""--prometheus and its options, shared by the commands that read a cluster's history
(`check`, `snapshot --at`): the argparse wiring and the window it reads.

The history comes from a Prometheus-compatible server's HTTP API (Prometheus, Thanos,
VictoriaMetrics, Mimir): dcgm-exporter's series, or gputui's own exporter's
(gputui.collect.prom). Kept here so that each command adds a few lines, not a copy.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from gputui.commands.common import positive_float
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.collect.prom.columns import History

DEFAULT_STEP = 15.0  # dcgm-exporter's usual scrape interval
DEFAULT_DEADLINE = 60.0


def _match(text: str) -> str:
    from gputui.collect.prom.names import check_match

    try:
        return check_match(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _label(text: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", text):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a label name")
    return text


def _step(text: str) -> float:
    s = positive_float(text)
    if s < 1.0 or s > 86400:
        raise argparse.ArgumentTypeError("a step from 1 s to 1 day")
    return s


def add_prom_args(p: argparse.ArgumentParser, *, window: bool = True) -> None:
    """--prometheus URL and what narrows it. `window`: --from/--to (snapshot --at has one
    instant and brings its own)."""
    g = p.add_argument_group("cluster history (a Prometheus-compatible server)")
    g.add_argument(
        "--prometheus",
        metavar="URL",
        default=None,
        help="read dcgm-exporter's (or gputui exporter's) GPU series from this server's "
        "HTTP API instead of NVML (docs/history.md)",
    )
    if window:
        g.add_argument(
            "--from",
            dest="prom_from",
            metavar="T",
            default=None,
            help="start of the window: epoch seconds, ISO 8601, or '3h ago'",
        )
        g.add_argument(
            "--to",
            dest="prom_to",
            metavar="T",
            default="now",
            help="end of the window (default now)",
        )
    g.add_argument(
        "--match",
        type=_match,
        default=None,
        metavar="MATCHERS",
        help="label matchers to narrow the series, e.g. 'namespace=\"ml\"'",
    )
    g.add_argument(
        "--job-label",
        type=_label,
        default=None,
        metavar="L",
        help="group GPUs into jobs by this label (default: the pod name without its "
        "replica suffix, else per node)",
    )
    g.add_argument(
        "--job",
        dest="prom_job",
        default=None,
        metavar="NAME",
        help="only this job's verdict (a job as the output names it, e.g. ml/train)",
    )
    g.add_argument(
        "--nodes",
        default=None,
        metavar="LIST",
        help="only these nodes (Hostname label): a,b or node[01-08] or @FILE",
    )
    g.add_argument(
        "--step",
        type=_step,
        default=DEFAULT_STEP,
        metavar="S",
        help=f"seconds between samples read (default {DEFAULT_STEP:g}: the usual scrape interval)",
    )
    g.add_argument("--token-file", metavar="F", default=None, help="bearer token for the server")
    g.add_argument("--ca-file", metavar="F", default=None, help="CA bundle for an https server")
    g.add_argument(
        "--prom-timeout",
        type=positive_float,
        default=DEFAULT_DEADLINE,
        metavar="S",
        help=f"give up on the server after S seconds in all (default {DEFAULT_DEADLINE:g})",
    )


def check_alone(args: argparse.Namespace, others: tuple[str, ...] = ("replay", "demo")) -> None:
    """--prometheus reads its own source: not with --replay or --demo."""
    for name in others:
        if getattr(args, name, None):
            raise GputuiError(f"--prometheus and --{name} are two sources: give one")


def nodes_of(args: argparse.Namespace) -> tuple[str, ...]:
    if not args.nodes:
        return ()
    from gputui.collect.hostlist import HostListError, expand_hosts

    try:
        return tuple(expand_hosts(args.nodes))
    except HostListError as e:
        raise GputuiError(f"--nodes: {e}") from None


def read_window(
    args: argparse.Namespace, start: float, end: float, *, now: float | None = None
) -> History:
    """The window's columns (one exchange with the server, bounded by --prom-timeout)."""
    from gputui.collect.prom.client import open_server
    from gputui.collect.prom.fetch import read_history

    server = open_server(args.prometheus, args.token_file, args.ca_file)
    args.prom_shown = server.shown  # the URL without credentials, for what is written
    return read_history(
        server,
        start,
        end,
        args.step,
        match=args.match,
        nodes=nodes_of(args),
        job_label=args.job_label,
        deadline_s=args.prom_timeout,
    )


def window_of(args: argparse.Namespace) -> tuple[float, float]:
    """--from/--to as Unix seconds (relative ones against the clock, read once)."""
    from gputui.collect.prom.timespec import window

    if args.prom_from is None:
        raise GputuiError("--prometheus needs --from (e.g. --from '3h ago')")
    return window(args.prom_from, args.prom_to, time.time())
