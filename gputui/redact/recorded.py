"""Redaction of what a recording says, as it is read.

Live command lines are redacted where /proc is read (gputui.collect.procs.reader) and tool output
where it is produced (gputui.tools.runner), but a recording is anyone's file: written by an
older gputui, by hand, or by someone else's tool. Without this, `snapshot --replay --json`
printed its secrets and `bundle --replay` copied them; and the typed records (stack dumps,
health notes, rendezvous listeners, last words...) came through unread, so a secret in a
health note or a stack dump's error reached every face. The same command lines and frames
come back on every sample and every dump, so results are cached.
"""

from __future__ import annotations

import bisect
import re
from functools import lru_cache
from typing import Any

from gputui.redact import is_secret_name, redact_argv, redact_command, redact_text
from gputui.redact.names import holds_a_path, looks_like_path
from gputui.redact.rules import REDACTED
from gputui.redact.scan import apply_spans, text_spans
from gputui.redact.tools import Programs

_MAX_DEPTH = 64  # the reader refuses deeper nesting long before (trace_schema.MAX_DEPTH)


@lru_cache(maxsize=4096)
def _argv(args: tuple[str, ...], program: str | tuple[str, ...] | None) -> tuple[str, ...]:
    return tuple(redact_argv(args, program))


def recorded_argv(args: tuple[str, ...], program: Programs = None) -> tuple[str, ...]:
    """A recorded command line with secrets redacted (`program`: the recorded name).

    Args:
        args: the command line as recorded.
        program: the executable's recorded name(s); None: argv[0].

    Returns:
        The command line with secrets redacted.
    """
    if program is not None and not isinstance(program, str):
        program = tuple(program)
    return _argv(args, program)


@lru_cache(maxsize=4096)
def recorded_text(text: str | None) -> str | None:
    """A recorded string (a parent command line, a note, a frame) with secrets redacted.

    Args:
        text: the recorded string; None stays None.

    Returns:
        The string with secrets redacted.
    """
    return redact_text(text) if text else text


def _secret_named(name: str, value: str) -> bool:
    return (
        bool(value) and is_secret_name(name) and not (holds_a_path(name) and looks_like_path(value))
    )


def _redact_together(texts: list[str]) -> list[str]:
    """Each text redacted, in one pass over all of them joined by newlines: a record holds
    hundreds of short strings (frames, file names), and one scan of their join costs a
    fraction of hundreds of scans. A find that runs across a newline (a quoted value, a PEM
    body) is redacted in every text it touches: more, never less, than one at a time."""
    if not texts:
        return texts
    big = "\n".join(texts)
    spans = text_spans(big)
    if not spans:
        return texts
    starts, at = [], 0
    for t in texts:
        starts.append(at)
        at += len(t) + 1
    per: list[list[tuple[int, int]]] = [[] for _ in texts]
    for a, b in spans:
        i = max(0, bisect.bisect_right(starts, a) - 1)
        while i < len(texts) and starts[i] < b:
            lo, hi = max(a, starts[i]), min(b, starts[i] + len(texts[i]))
            if lo < hi:
                per[i].append((lo - starts[i], hi - starts[i]))
            i += 1
    return [apply_spans(t, p) if p else t for t, p in zip(texts, per, strict=True)]


_HEADER = re.compile(r"(Process \d+: )([^\n]*)")


def _headers(text: str) -> str:
    """py-spy's `Process N: <command line>` quoted in a record (a failed dump's error) is a
    command line: redacted by the process table's rules (`redis-cli -a PW`), not as text."""
    if "Process " not in text:
        return text
    return _HEADER.sub(lambda m: m.group(1) + redact_command(m.group(2)), text)


def recorded_record(record: dict[str, Any]) -> dict[str, Any]:
    """A typed record (stacks, health, rendezvous, lastwords, nccl...) with every string in
    it redacted: as text wherever it stands (a health note, a stack dump's error, a
    rendezvous listener's name, a frame), and whole under a secret-named key (`{"password":
    ...}`, a list of `api_keys`), as an environment's values are. gputui's own field names
    are none of them secret-named (a test holds it so). Numbers, booleans and keys stay.

    Args:
        record: a typed record, as written or read back.

    Returns:
        A copy with every string redacted.
    """
    texts: list[str] = []

    def gather(v: Any, name: str, depth: int) -> None:
        if isinstance(v, str):
            if not _secret_named(name, v):
                texts.append(v)
        elif depth < _MAX_DEPTH and isinstance(v, dict):
            for k, x in v.items():
                gather(x, k if isinstance(k, str) else name, depth + 1)
        elif depth < _MAX_DEPTH and isinstance(v, list):
            for x in v:
                gather(x, name, depth + 1)

    gather(record, "", 0)
    redacted = iter(_redact_together([_headers(t) for t in texts]))

    def build(v: Any, name: str, depth: int) -> Any:
        if isinstance(v, str):
            return REDACTED if _secret_named(name, v) else next(redacted)
        if depth < _MAX_DEPTH and isinstance(v, dict):
            return {k: build(x, k if isinstance(k, str) else name, depth + 1) for k, x in v.items()}
        if depth < _MAX_DEPTH and isinstance(v, list):
            return [build(x, name, depth + 1) for x in v]
        return v

    out: dict[str, Any] = build(record, "", 0)
    return out
