"""Start the dashboard (the default when no subcommand is given)."""

from __future__ import annotations

import argparse

from gputui.commands.common import open_source
from gputui.errors import GputuiError


def run(args: argparse.Namespace) -> int:
    if args.hang_after < args.stall_after:
        raise GputuiError("--hang-after must be at least --stall-after")
    source = open_source(args, realtime=True)
    from gputui.ui.app import GputuiApp

    app = GputuiApp(source, stall_after=args.stall_after, hang_after=args.hang_after)
    try:
        app.run(mouse=not args.no_mouse)
    finally:
        app.sampler.stop()
        source.close()
    return 0
