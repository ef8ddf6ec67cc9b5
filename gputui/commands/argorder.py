"""Global options typed before the sub-command mean what they mean after it.

argparse gives each sub-command its own parser: `gputui --demo check` set `demo` on the main
parser's namespace, and the `check` parser then wrote its own default (`demo=False`) over it,
so the check ran live and said nothing about the `--demo` it had dropped. Here the options
typed before the sub-command are moved after its name, where its own parser reads them; an
option the sub-command does not take is one clear error that names its `--help`, never
silence.
"""

from __future__ import annotations

import argparse

from gputui.errors import GputuiError

_MAIN_ONLY = frozenset({"-h", "--help", "--version"})


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser | None:
    """The parser of sub-command `name`, None for the dashboard (no sub-command)."""
    return _subparsers(parser).get(name) if name else None


def _action(parsers: list[argparse.ArgumentParser], option: str) -> argparse.Action | None:
    """The first of `parsers` that knows `option` (as typed, or its unambiguous prefix)."""
    for p in parsers:
        if option in p._option_string_actions:
            return p._option_string_actions[option]
    for p in parsers:  # argparse also takes an unambiguous prefix (--dem for --demo)
        hits = {a for s, a in p._option_string_actions.items() if s.startswith(option)}
        if len(hits) == 1 and option.startswith("--"):
            return hits.pop()
    return None


def _takes_value(action: argparse.Action | None) -> bool:
    return action is not None and action.nargs != 0


def reorder(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`argv` with the options typed before the sub-command moved after its name.

    Raises GputuiError (exit 2) for an option typed before the sub-command that the
    sub-command does not take (`gputui --speed 2 check`). Without a sub-command, or with
    only --help/--version before it, `argv` is returned as it is.
    """
    subs = _subparsers(parser)
    everyone = [parser, *subs.values()]
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return argv
        if not token.startswith("-") or token == "-":
            break
        if "=" not in token and _takes_value(_action(everyone, token)):
            i += 1  # its value, e.g. --replay FILE
        i += 1
    else:
        return argv
    name = argv[i]
    if name not in subs or i == 0:
        return argv
    before = argv[:i]
    if any(t in _MAIN_ONLY for t in before):
        return argv  # `gputui --help check`: the main help, as argparse gives it
    sub = subs[name]
    j = 0
    while j < len(before):
        token = before[j]
        option = token.split("=", 1)[0]
        if _action([sub], option) is None:
            raise GputuiError(
                f"{option} does not apply to `gputui {name}` (see gputui {name} --help)"
            )
        j += 2 if "=" not in token and _takes_value(_action([sub], option)) else 1
    return [name, *before, *argv[i + 1 :]]


def not_applying(parser: argparse.ArgumentParser, name: str | None, extra: list[str]) -> str:
    """The words for arguments the sub-command `name` did not take: an option another of
    gputui's parsers knows (`gputui dump --demo 1`) "does not apply" to it, as the docs say;
    anything else is argparse's "unrecognized arguments"."""
    others = [parser, *_subparsers(parser).values()]
    options = [t.split("=", 1)[0] for t in extra if t.startswith("-") and t != "-"]
    known = [o for o in options if _action(others, o) is not None]
    if name and known and len(known) == len(options):
        return f"{', '.join(known)} does not apply to `gputui {name}`"
    return f"unrecognized arguments: {' '.join(extra)}"


def suggestion(message: str) -> str:
    """argparse's "invalid choice: 'chek' (choose from 'check', ...)" with "did you mean
    check?" when one choice is close (argparse's own suggest_on_error is Python 3.14+)."""
    import difflib
    import re

    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if m is None:
        return message
    choices = re.findall(r"'([^']*)'", m.group(2))
    close = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.6)
    return f"{message}: did you mean {close[0]}?" if close else message
