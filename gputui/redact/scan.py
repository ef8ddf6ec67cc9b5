"""Finding secrets in text and in argv: every rule returns spans, one pass replaces them.

Rules (rules.py, formats.py) return spans rather than rewriting the string one after
another, so no rule can undo or hide another's work, overlapping finds merge, and what is
not secret comes through unchanged. Quoted C strings (gdb's `url=0x5555 "postgres://..."`,
strace's `write(3, "pw=x\\n", 5)`, escaped `\\x..` bytes) are decoded, scanned as text, and
their spans mapped back; strace's argv arrays (`["mysql", "-psecret"]`) are scanned as argv.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from gputui.redact.formats import Span, aws_context, aws_secret_spans, format_spans
from gputui.redact.names import holds_a_path, is_secret_name, looks_like_path
from gputui.redact.rules import (
    MAX_VALUE,
    REDACTED,
    USER_OPTIONS,
    auth_and_netrc_spans,
    flag_spans,
    gdb_arg_spans,
    is_glued_p,
    pair_spans,
    takes_any_value,
    url_spans,
)
from gputui.redact.tools import tool_spans

_MAX_DEPTH = 2  # quoted strings inside quoted strings (JSON in a JSON string in a C string)


def apply_spans(text: str, spans: Iterable[Span]) -> str:
    """Replace each span (merged where they overlap or touch) with REDACTED."""
    merged: list[list[int]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out, pos = [], 0
    for a, b in merged:
        if text[a:b].strip() in ("", REDACTED):
            continue  # already redacted: keep it as it is (redaction is idempotent)
        out.append(text[pos:a])
        out.append(REDACTED)
        pos = b
    out.append(text[pos:])
    return "".join(out)


_C_STRING = re.compile(rf'"((?:[^"\\]|\\.){{2,{MAX_VALUE}}})"')
# strace's argv arrays: ["mysql", "-psecret"], with "..." where it cut a string or the list.
_ARRAY = re.compile(
    rf'\[(?:"(?:[^"\\]|\\.){{0,{MAX_VALUE}}}"(?:\.\.\.)?(?:, )?){{1,1024}}(?:\.\.\.)?\]'
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a", "b": "\b"}
_ESCAPES["e"] = "\x1b"
_OCTAL = re.compile(r"[0-7]{1,3}")
_HEX2 = re.compile(r"[0-9a-fA-F]{2}")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def decode_c_string(body: str) -> tuple[str, list[int]]:
    """The text a C/JSON string literal's body stands for, and where each of its characters
    starts in `body` (plus one entry for the end), so spans found in it map back."""
    out: list[str] = []
    starts: list[int] = []
    i, n = 0, len(body)
    while i < n:
        starts.append(i)
        c = body[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in "01234567":
            m = _OCTAL.match(body, i + 1)
            assert m is not None
            out.append(chr(int(m.group(0), 8) & 0xFF))
            i = m.end()
        elif e == "x" and (m := _HEX2.match(body, i + 2)):
            out.append(chr(int(m.group(0), 16)))
            i = m.end()
        elif e == "u" and (m := _HEX4.match(body, i + 2)):
            out.append(chr(int(m.group(0), 16)))
            i = m.end()
        else:
            out.append(_ESCAPES.get(e, e))
            i += 2
    starts.append(n)
    return "".join(out), starts


def _mapped(spans: Iterable[Span], starts: Sequence[int], offset: int) -> Iterator[Span]:
    for a, b in spans:
        yield offset + starts[a], offset + starts[b]


def _quoted_spans(text: str, depth: int) -> Iterator[Span]:
    for m in _C_STRING.finditer(text):
        body = m.group(1)
        decoded, starts = decode_c_string(body)
        yield from _mapped(text_spans(decoded, depth + 1), starts, m.start(1))
    for m in _ARRAY.finditer(text):
        elems = list(_C_STRING.finditer(m.group(0)))
        args = [decode_c_string(e.group(1)) for e in elems]
        per_arg = argv_spans([d for d, _ in args], depth + 1)
        for e, (_, starts), spans in zip(elems, args, per_arg, strict=True):
            yield from _mapped(spans, starts, m.start() + e.start(1))


def text_spans(text: str, depth: int = 0) -> list[Span]:
    """Spans of every secret in free text: tool output, a command line joined by spaces,
    an environment value."""
    spans: list[Span] = list(format_spans(text))
    spans += url_spans(text)
    spans += pair_spans(text)
    spans += gdb_arg_spans(text)
    spans += flag_spans(text)
    spans += auth_and_netrc_spans(text)
    if depth < _MAX_DEPTH and '"' in text:
        spans += _quoted_spans(text, depth)
    return spans


_OPTION = re.compile(r"--?[A-Za-z][\w.\-]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][\w.\-+]*=")


def _is_option(arg: str) -> bool:
    """`--epochs`, `-v`: the next word after a secret switch when it took no value."""
    return _OPTION.fullmatch(arg) is not None and (arg.startswith("--") or len(arg) == 2)


def argv_spans(args: Sequence[str], depth: int = 0) -> list[list[Span]]:
    """For each argument, the spans that hold a secret.

    The value after a secret option is secret, in every spelling: `--pw X`, `--pw=X`,
    `-p X`, `-pX`; so is the value of `NAME=X` when NAME is secret; `-u user:password` hides
    the password. After a secret-named long option the next argument is its value whatever
    it looks like (`--password --dashPW33`: a password may start with a dash; a switch such
    as `--use-token` or `--no-password` is not secret-named). Only the short options whose
    letter is a password to some tools alone (`-p`, `-u`) took no value when another option
    follows (`mkdir -p -m 755`). Everything else is scanned as text.
    """
    out: list[list[Span]] = [[] for _ in args]
    pending: str | None = None  # the option whose value this argument is
    for i, arg in enumerate(args):
        opt, pending = pending, None
        if opt is not None and arg and (takes_any_value(opt) or not _is_option(arg)):
            if opt in USER_OPTIONS:
                if ":" in arg:
                    out[i].append((arg.index(":") + 1, len(arg)))
                    continue
            elif not ((opt == "-p" or holds_a_path(opt)) and looks_like_path(arg)):
                out[i].append((0, len(arg)))
                continue
        if _OPTION.fullmatch(arg):
            if is_glued_p(arg):
                out[i].append((2, len(arg)))
            elif is_secret_name(arg) or arg in USER_OPTIONS:
                pending = arg
            continue
        m = _OPTION.match(arg) if arg.startswith("-") else _ASSIGNMENT.match(arg)
        if m is not None:
            name = arg[: m.end()].rstrip("=")
            if arg[len(name) : len(name) + 1] == "=":
                value_at = len(name) + 1
                value = arg[value_at:]
                if is_secret_name(name):
                    if value and not (holds_a_path(name) and looks_like_path(value)):
                        out[i].append((value_at, len(arg)))
                    continue
                if name in USER_OPTIONS and ":" in value:
                    out[i].append((value_at + value.index(":") + 1, len(arg)))
                    continue
        out[i] += text_spans(arg, depth)
    for i, extra in enumerate(tool_spans(args)):  # redis-cli -a X, ldapsearch -w X ...
        out[i] += extra
    if aws_context(args):  # `aws ... AKIA... <secret key>`: the key id names the next one
        for i, arg in enumerate(args):
            out[i] += aws_secret_spans(arg)
    return out
