"""`--debug-server HOST:PORT` and `--debug-dump-dir DIR`: where a job's PyTorch debug server is,
when gputui cannot find it itself (rank 0 on another node on a port other than 25999, a
front end behind a forward), and where its periodic dumps are (gputui.collect.nccl.debugserver).

Why options of their own beside the detector's: the commands that gather evidence at a
stall (the dashboard, `check`, `record`) hand them to the Watcher's debug-server gatherer
(gputui.watch.settings.WatchSettings.from_args binds them);
a bad value is one line and exit 2 before anything starts.
"""

from __future__ import annotations

import argparse
import os


def server_addr(text: str) -> str:
    """argparse type: HOST:PORT, [V6]:PORT or PORT (this host)."""
    from gputui.collect.nccl.debugserver_find import parse_addr

    try:
        parse_addr(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text.strip()


def dump_dir(text: str) -> str:
    """argparse type: a directory that exists, as an absolute path."""
    path = os.path.abspath(os.path.expanduser(text))
    if not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"not a directory: {text[:200]!r}")
    return path


def add_debug_server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--debug-server",
        type=server_addr,
        default=None,
        metavar="HOST:PORT",
        help="the job's PyTorch debug server (torch.distributed.debug.start_debug_server), "
        "when it is not rank 0's child on this node or MASTER_ADDR:25999",
    )
    p.add_argument(
        "--debug-dump-dir",
        type=dump_dir,
        default=None,
        metavar="DIR",
        help="the debug server's periodic dumps (its dump_dir): read when no server "
        "answers, or the job is gone",
    )
