"""Start the dashboard (the default when no subcommand is given)."""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING

from gputui.commands.common import open_source
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.collect.source import Source

NVML_START_TIMEOUT = 15.0  # seconds for nvmlInit and the device list before giving up


def _open_in_background(args: argparse.Namespace) -> tuple[threading.Thread, list]:
    """Open the source (nvmlInit, device list) in a thread.

    It overlaps with importing Textual (~0.2-0.3 s), which shortens the time to the first
    frame, and a driver that does not answer cannot hang the start: the wait is bounded.
    """
    result: list = []

    def work() -> None:
        try:
            result.append(open_source(args, realtime=True))
        except BaseException as e:  # re-raised in the main thread
            result.append(e)

    t = threading.Thread(target=work, name="gputui-open-source", daemon=True)
    t.start()
    return t, result


def run(args: argparse.Namespace) -> int:
    if args.hang_after < args.stall_after:
        raise GputuiError("--hang-after must be at least --stall-after")
    thread, result = _open_in_background(args)
    from gputui.ui.app import GputuiApp

    replay = getattr(args, "demo", False) or getattr(args, "replay", None) is not None
    # A replay is read by the bounded reader (trace_read), which ends on its own; only NVML
    # can hang, so only a live start has the NVML timeout and message.
    thread.join(None if replay else NVML_START_TIMEOUT)
    if not result:
        raise GputuiError(
            f"NVML did not answer within {NVML_START_TIMEOUT:.0f} s (is the driver hung? "
            "try nvidia-smi); `gputui --demo` works without it"
        )
    if isinstance(result[0], BaseException):
        raise result[0]
    source: Source = result[0]
    app = GputuiApp(source, stall_after=args.stall_after, hang_after=args.hang_after)
    try:
        app.run(mouse=not args.no_mouse)
    finally:
        app.sampler.stop()
        source.close()
    return 0
