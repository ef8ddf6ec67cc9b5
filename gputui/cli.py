"""Command line: `gputui` starts the dashboard; subcommands are the plain modes for scripts.

Every error the user can cause ends as one line on stderr and exit status 2, never a traceback.
Each subcommand lives in gputui/commands/<name>.py with `register(subparsers)` and a `run(args)`
that returns the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from gputui import __version__
from gputui.errors import GputuiError

# Subcommand modules, in the order `gputui --help` lists them.
COMMANDS = (
    "snapshot",
    "record",
    "check",
    "dump",
    "bundle",
    "probe",
    "merge",
    "fleet",
    "exporter",
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument gives one line, not a usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from gputui.commands.common import add_app_args

    parser = _Parser(
        prog="gputui",
        description="Live GPU and process dashboard for NVIDIA nodes, with an NCCL hang detector.",
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    add_app_args(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"gputui.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"gputui.commands.{name}":
                raise
            continue  # a command not built yet
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command is None:
            from gputui.commands.app import run as run_app

            return run_app(args)
        return int(args.func(args))
    except GputuiError as e:
        print(f"gputui: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
