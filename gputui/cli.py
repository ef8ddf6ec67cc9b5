"""Command line: `gputui` starts the dashboard; subcommands are the plain modes for scripts.

Every error the user can cause ends as one line on stderr and exit status 2, never a traceback.
Each subcommand lives in gputui/commands/<name>.py with `register(subparsers)` and a `run(args)`
that returns the exit status.

Three ways out are handled here once, for every mode:

- a crash (an exception no command expected: a bug) is one line on stderr naming the
  exception and the place in gputui it came from, asking for a report, and exit status
  CRASH (5, gputui.diagnose.exitcodes), never 1 (a hang) or 2 (bad input), so that a caller
  never takes a bug for a verdict; GPUTUI_DEBUG=1 prints the traceback too;

- stdout closed by its reader (`gputui check --json | head -1`): gputui.stdout_guard points
  stdout at /dev/null at the first write that finds the reader gone, and the command ends
  quietly with its own status (check's verdict). A broken pipe raised past that guard (a
  write straight to the file descriptor) stops the command with STDOUT_CLOSED (0);
- a thread left inside NVML (a call that never returned): the process leaves through
  `os._exit` after flushing, since a normal exit runs the C libraries' destructors, which may
  wait for that thread forever.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import traceback
from typing import NoReturn

from gputui import __version__, stdout_guard
from gputui.errors import GputuiError
from gputui.textsafe import clean

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

STDOUT_CLOSED = 0  # exit status when the reader of stdout went away


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument gives one line, not a usage block."""

    def error(self, message: str) -> NoReturn:
        from gputui.commands.argorder import suggestion

        message = suggestion(message)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Formatter(argparse.HelpFormatter):
    """argparse's, but an epilog that is an exit-code table keeps its lines."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXIT_CODES_HEAD):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


EXIT_CODES_HEAD = "exit codes:"
JUDGING = ("check", "merge", "fleet", "probe")  # these end with an exit-code table

# The codes of the verdict table (gputui.diagnose.exitcodes.TABLE) each judging command can
# exit with, and its own words where they differ: merge and fleet have no --fail-on-slow (a
# slow job is 0), probe judges pairs and hosts, not a job's verdict.
_OWN_CODES: dict[str, dict[int, str | None]] = {
    "merge": {0: "healthy (a slow or busy job too)", 1: None, 2: None, 3: None},
    "fleet": {
        0: "healthy (a slow or busy job too)",
        1: None,
        2: "bad input, or no host answered",
        3: None,
    },
    "probe": {
        0: "every pair (or host) passed",
        1: "a pair or a host failed",
        2: "usage or error: bad arguments, no torch, no GPU to probe",
    },
}  # fmt: skip


def _table(name: str | None) -> str:
    """The exit-code table of `name`, as --help prints it, the crash code last."""
    from gputui.diagnose import exitcodes

    own = _OWN_CODES.get(name or "")
    if own is None:
        return exitcodes.help_text()
    rows = [f"  {c}  {own[c] or what}" for c, what in exitcodes.TABLE if c in own]
    return "\n".join([EXIT_CODES_HEAD, *rows, exitcodes.crash_line()])


def _exit_codes_epilog(name: str | None, p: argparse.ArgumentParser) -> None:
    """Every --help ends with the exit codes: each judging command's own table, the crash
    code (gputui.diagnose.exitcodes.CRASH) after any other command's own."""
    from gputui.diagnose import exitcodes

    if name in JUDGING:
        full = exitcodes.help_text()
        if not p.epilog:
            p.epilog = _table(name)
        elif p.epilog.startswith(full):  # merge's and fleet's: the table, then their rule
            p.epilog = _table(name) + p.epilog[len(full) :]
    epilog = p.epilog or ""
    if not epilog.startswith(EXIT_CODES_HEAD):
        own = "as docs/commands says for this command, and" if name else "0, 2 on bad input, and"
        epilog = (epilog + "\n\n" if epilog else "") + f"{EXIT_CODES_HEAD} {own}"
    if f"\n  {exitcodes.CRASH}  " not in epilog:
        epilog += "\n" + exitcodes.crash_line()
    p.epilog = epilog
    if p.formatter_class is argparse.HelpFormatter:
        p.formatter_class = _Formatter


def build_parser(commands: bool = True) -> argparse.ArgumentParser:
    """The command line's parser; `commands=False`: the dashboard's options alone, without
    importing any sub-command's module (see `_dashboard_only`)."""
    from gputui.commands.common import add_app_args
    from gputui.commands.prom_args import add_prom_args

    parser = _Parser(
        prog="gputui",
        description="Live GPU and process dashboard for NVIDIA nodes, with an NCCL hang detector.",
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    add_app_args(parser)
    add_prom_args(parser)  # the dashboard over a node's history (gputui.commands.prom_replay)
    if not commands:
        parser.set_defaults(command=None)
        return parser
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"gputui.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"gputui.commands.{name}":
                raise
            continue  # a command not built yet
        module.register(sub)
    _exit_codes_epilog(None, parser)
    for name, p in sub.choices.items():
        _exit_codes_epilog(name, p)
    return parser


def _dashboard_only(parser: argparse.ArgumentParser, argv: list[str]) -> bool:
    """`argv` holds only the dashboard's own options (and their values): no word that could
    name a sub-command, no --help. The dashboard then starts without importing the ten
    sub-commands' modules (about 0.5 MB resident and a few ms before the first frame). Any
    other word, even a typo, goes to the whole parser, which says what is wrong as before."""
    takes_value = {
        o for a in parser._actions if a.nargs != 0 for o in a.option_strings if o.startswith("--")
    }
    i = 0
    while i < len(argv):
        token = argv[i]
        option = token.split("=", 1)[0]
        if token in ("--", "-") or not token.startswith("-") or option in ("-h", "--help"):
            return False
        if option not in parser._option_string_actions:
            return False  # a typo or an abbreviation: the whole parser's words for it
        if "=" not in token and option in takes_value:
            i += 1  # its value, e.g. --replay FILE
        i += 1
    return True


def _dispatch(argv: list[str] | None) -> int:
    from gputui.commands.argorder import not_applying, reorder, subparser

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(commands=False)
    if not _dashboard_only(parser, argv):
        parser = build_parser()
    try:
        # `gputui --demo check` checks the demo: options before the sub-command are its own.
        argv = reorder(parser, argv)
        args, extra = parser.parse_known_args(argv)
        if extra:  # named by the parser that was reading them: `see gputui check --help`
            (subparser(parser, args.command) or parser).error(
                not_applying(parser, args.command, extra)
            )
    except SystemExit as e:  # --help, --version, or a usage error already printed
        return e.code if isinstance(e.code, int) else 2
    except GputuiError as e:
        print(f"gputui: {clean(str(e))}", file=sys.stderr)  # it may quote a path or a file
        return e.exit_code
    _interrupts_raise()
    try:
        if args.command is None:
            from gputui.commands.app import run as run_app

            return run_app(args)
        return int(args.func(args))
    except GputuiError as e:
        print(f"gputui: {clean(str(e))}", file=sys.stderr)  # it may quote a path or a file
        return e.exit_code
    except KeyboardInterrupt:
        return 130


def _interrupts_raise() -> None:
    """The command is about to run: Ctrl-C raises KeyboardInterrupt again (gputui.entry made
    it leave at once, quietly, while the modules were imported)."""
    entry = sys.modules.get("gputui.entry")
    if entry is not None and entry.early_interrupt_is_installed():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _stdout_fd() -> int:
    try:
        return int(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return 1


def _flush_all() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def crashed(e: BaseException, command: str | None) -> int:
    """A bug: one line naming the exception and where in gputui it came from (the traceback
    with GPUTUI_DEBUG=1), and exit status CRASH."""
    from gputui.diagnose.exitcodes import CRASH
    from gputui.textsafe import clean

    where = ""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        path = frame.filename.replace(os.sep, "/")
        if "/gputui/" in path:
            where = f" at gputui/{path.rsplit('/gputui/', 1)[1]}:{frame.lineno}"
            break
    if os.environ.get("GPUTUI_DEBUG", "") not in ("", "0"):
        traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
    what = clean(f"{type(e).__name__}: {e}", limit=200)
    mode = f" in {command}" if command else ""
    try:
        print(
            f"gputui: internal error{mode}: {what}{where}; please report it "
            "(GPUTUI_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
    except (OSError, ValueError):
        pass
    return CRASH


def _command_of(argv: list[str] | None) -> str | None:
    args = sys.argv[1:] if argv is None else argv
    return next((a for a in args if a in COMMANDS), None)


def main(argv: list[str] | None = None) -> int:
    code: int | None = None
    stdout_guard.guard()
    try:
        code = _dispatch(argv)
        sys.stdout.flush()  # here, not at interpreter exit, so a closed pipe is caught
    except BrokenPipeError as e:
        if stdout_guard.reader_gone(_stdout_fd()):
            stdout_guard.to_devnull(_stdout_fd())
            # An error already told on stderr keeps its status; anything else was cut short
            # by a reader who chose to stop reading.
            code = code if code == 2 else STDOUT_CLOSED
        else:  # some other pipe: a bug, not a reader that went away
            code = crashed(e, _command_of(argv))
    except OSError as e:  # closed, full or read-only stdout: one line, not a traceback
        why = stdout_guard.why(e)
        if why is None:
            code = crashed(e, _command_of(argv))
        else:
            print(f"gputui: {why}", file=sys.stderr)
            stdout_guard.to_devnull(_stdout_fd())
            code = 2
    except KeyboardInterrupt:  # Ctrl-C while the arguments were parsed: quietly
        code = 130
    except Exception as e:  # a bug in any command: its own exit status, not 1 or 2
        code = crashed(e, _command_of(argv))
    finally:
        stdout_guard.unguard()
    nvml = sys.modules.get("gputui.collect.nvml.thread")
    if nvml is not None and nvml.stuck():  # type: ignore[attr-defined]
        _flush_all()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
