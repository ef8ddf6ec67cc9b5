"""`gputui exporter`: serve the GPUs' readings and the hang detector's state to Prometheus.

The work lives in gputui/exporter/; this module parses the arguments, checks that the
optional prometheus-client is installed, opens the Source (bounded: a wedged driver cannot
hang the start) and hands over.
"""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING

from gputui.commands.common import (
    add_detector_args,
    add_replay_args,
    add_source_args,
    check_detector_args,
    open_source,
)
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.collect.source import Source

DEFAULT_LISTEN = "127.0.0.1:9835"  # the same as gputui.exporter.server.DEFAULT_LISTEN
OPEN_TIMEOUT_S = 15.0  # nvmlInit and the device list, before giving up
NEEDS_CLIENT = "the exporter needs prometheus-client: pip install 'gputui[exporter]'"


def _listen(text: str) -> tuple[str, int]:
    """argparse type for --listen: one line on a bad ADDR:PORT."""
    from gputui.exporter.server import parse_listen

    try:
        return parse_listen(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "exporter",
        help="serve GPU readings and the hang detector's state as Prometheus metrics",
        description=(
            "Sample the GPUs (or replay a recording), run the hang detector on every sample "
            "and serve the result at http://ADDR:PORT/metrics for Prometheus. Scrapes read "
            "the latest sample only. It never attaches to a process."
        ),
    )
    p.add_argument(
        "--listen",
        type=_listen,
        default=DEFAULT_LISTEN,
        metavar="ADDR:PORT",
        help=f"address to serve on (default {DEFAULT_LISTEN}: this host only; port 0 picks "
        "a free port)",
    )
    add_source_args(p)
    add_replay_args(p)
    p.add_argument(
        "--loop",
        action="store_true",
        help="start a replay over when it ends (a demo exporter that stays up)",
    )
    add_detector_args(p)  # the exporter never attaches to a process: no --no-auto-dump
    p.set_defaults(func=run)


def _open(args: argparse.Namespace) -> Source:
    """The Source, opened in a thread with a time limit (nvmlInit can block)."""
    result: list[object] = []

    def work() -> None:
        try:
            result.append(open_source(args, realtime=True))
        except BaseException as e:  # re-raised below, in the main thread
            result.append(e)

    t = threading.Thread(target=work, name="gputui-open-source", daemon=True)
    t.start()
    t.join(OPEN_TIMEOUT_S)
    if not result:
        raise GputuiError(
            f"NVML did not answer within {OPEN_TIMEOUT_S:.0f} s (is the driver hung? try "
            "nvidia-smi)"
        )
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]  # type: ignore[return-value]


def run(args: argparse.Namespace) -> int:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise GputuiError(NEEDS_CLIENT) from None
    import socket

    from gputui.exporter.looping import LoopingSource
    from gputui.exporter.run import serve
    from gputui.watch.settings import WatchSettings

    check_detector_args(args)
    replay = args.demo or args.replay
    if args.loop and not replay:
        raise GputuiError("--loop needs --replay FILE or --demo")
    if not replay and (args.speed != 1.0 or args.start is not None):
        raise GputuiError("--speed and --start need --replay FILE or --demo")
    source = _open(args)
    if source.kind == "host":  # no GPU: a live exporter would have nothing to say
        error = getattr(getattr(source, "nvml", None), "error", None) or "no GPU found"
        source.close()
        raise GputuiError(f"nothing to export: {error} (`gputui exporter --demo` works without)")
    # A replay's series name the recorded node, as `gputui check --demo` does.
    host = getattr(source, "node", None) if replay else None
    host = host or socket.gethostname()
    if args.loop:
        source = LoopingSource(source)  # type: ignore[arg-type]
    addr, port = args.listen
    return serve(
        source,
        addr=addr,
        port=port,
        host=host,
        settings=WatchSettings.from_args(args),
    )
