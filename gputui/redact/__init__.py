"""Redaction of secrets in environments, command lines and tool output, by default.

Training jobs carry tokens (HF_TOKEN, WANDB_API_KEY, AWS keys, database passwords) in their
environment, on their command line, inside URLs and JSON, and in the memory and system calls
that gdb and strace print. A list of known names always misses the next spelling, so the
rules work by kind rather than by list:

- names (variables, options, JSON and query keys) are judged word by word (`names.py`);
- on a command line, the value after any secret option is secret in every spelling
  (`--pw X`, `--pw=X`, `-p X`, `-pX`);
- values are scanned wherever they appear for URLs with a password or credential query
  keys, `name=value` / `name: value` / JSON pairs, connection strings, key formats, PEM
  private keys, JWTs and random-looking tokens (`formats.py`), including inside the quoted
  strings gdb and strace print (`scan.py`).

Only the secret is replaced with `<redacted>`; the rest stays readable. The rules lean
towards redacting too much: a hidden port costs little, a leaked token in a bundle a lot.
Redacting twice gives the same text as once, so a second pass at presentation is harmless.
Tool output is redacted where it is produced (gputui.tools.runner), command lines where
they are read (gputui.collect.procs.reader), environments where the bundle reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from gputui.faces import lazy_face
from gputui.redact.names import holds_a_path, is_secret_name, looks_like_path
from gputui.redact.scan import REDACTED, apply_spans, argv_spans, text_spans
from gputui.redact.tools import Programs, tool_spans

__all__ = [
    "is_secret_name",
    "recorded_argv",
    "recorded_record",
    "recorded_text",
    "redact_argv",
    "redact_command",
    "redact_env",
    "redact_text",
    "redact_value",
    "REDACTED",
]
# Names of the face defined in a module that itself imports this package (the redaction of a
# recording's fields is built on the functions below): imported on first use.
_WHERE = {
    "recorded_argv": "recorded",
    "recorded_record": "recorded",
    "recorded_text": "recorded",
}


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())


def redact_text(text: str) -> str:
    """Free text with every secret found in it replaced: tool output lines, a command line
    joined by spaces, an environment or config value.

    Args:
        text: any text.

    Returns:
        The text with each secret found replaced by `<redacted>`.
    """
    if not text:
        return text
    return apply_spans(text, text_spans(text))


def redact_value(name: str, value: str) -> str:
    """The value of a variable or option called `name`: all of it when the name says it is
    a secret (but a path in `*_FILE`/`*_PATH` stays, and an empty value stays empty),
    otherwise the secrets found inside it.

    Args:
        name: the variable's or option's name.
        value: its value.

    Returns:
        The value, redacted.
    """
    if is_secret_name(name):
        if not value or (holds_a_path(name) and looks_like_path(value)):
            return value
        return REDACTED
    return redact_text(value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` with secret-named variables and secrets inside values redacted.

    Args:
        env: an environment.

    Returns:
        A new dict, redacted.
    """
    return {k: redact_value(k, v) for k, v in env.items()}


def redact_argv(argv: Iterable[str], program: Programs = None) -> list[str]:
    """A command line with secrets redacted, argument by argument (`--token X`,
    `--api-key=X`, `-pX`, `PASS=X`, URLs, JSON and key formats inside arguments, and each
    known tool's own forms: `redis-cli -a X`). `program` is the executable's name, or its
    names (/proc/PID/comm, the basename of /proc/PID/exe), when they may differ from argv[0]
    (`exec -a`): its tool's rules then apply from the start.

    Args:
        argv: the command line, word by word.
        program: the executable's name(s), when they may differ from argv[0]; None: argv[0].

    Returns:
        A new list, each word redacted.
    """
    args = list(argv)
    spans = argv_spans(args)
    if program:
        for i, extra in enumerate(tool_spans(args, program)):
            spans[i] += extra
    return [apply_spans(a, s) if s else a for a, s in zip(args, spans, strict=True)]


def redact_command(text: str, argv: Sequence[str] = (), program: Programs = None) -> str:
    """A command line printed as one string by someone else (py-spy's `Process N: ...`
    header), redacted by the same rules as the process table's: by its argv when `argv`
    (the process's own, from /proc) is what the string shows, else by its words split at
    spaces; then as text, for what spans words. `program`: as for redact_argv.

    Args:
        text: the command line as one string.
        argv: the process's own argv, when known; (): split `text` at spaces.
        program: as for redact_argv.

    Returns:
        The string, redacted.
    """
    words = list(argv) if argv and " ".join(argv) == text else text.split(" ")
    return redact_text(" ".join(redact_argv(words, program)))
