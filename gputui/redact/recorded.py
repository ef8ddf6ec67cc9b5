"""Redaction of what a recording says, as it is read.

Live command lines are redacted where /proc is read (gputui.collect.procs) and tool output
where it is produced (gputui.tools.runner), but a recording is anyone's file: written by an
older gputui, by hand, or by someone else's tool. Without this, `snapshot --replay --json`
printed its secrets and `bundle --replay` copied them; and the typed records (stack dumps,
health notes, rendezvous listeners, last words...) came through unread, so a secret in a
health note or a stack dump's error reached every face. The same command lines and frames
come back on every sample and every dump, so results are cached.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from gputui.redact import is_secret_name, redact_argv, redact_text
from gputui.redact.names import holds_a_path, looks_like_path
from gputui.redact.rules import REDACTED
from gputui.redact.tools import Programs

_MAX_DEPTH = 64  # the reader refuses deeper nesting long before (trace_schema.MAX_DEPTH)


@lru_cache(maxsize=4096)
def _argv(args: tuple[str, ...], program: str | tuple[str, ...] | None) -> tuple[str, ...]:
    return tuple(redact_argv(args, program))


def recorded_argv(args: tuple[str, ...], program: Programs = None) -> tuple[str, ...]:
    """A recorded command line with secrets redacted (`program`: the recorded name)."""
    if program is not None and not isinstance(program, str):
        program = tuple(program)
    return _argv(args, program)


@lru_cache(maxsize=4096)
def recorded_text(text: str | None) -> str | None:
    """A recorded string (a parent command line, a note, a frame) with secrets redacted."""
    return redact_text(text) if text else text


def _string(name: str, value: str) -> str:
    if value and is_secret_name(name) and not (holds_a_path(name) and looks_like_path(value)):
        return REDACTED
    if len(value) > 4096:  # not worth a cache entry (and a hostile one would fill it)
        return redact_text(value)
    return recorded_text(value) or value


def recorded_record(record: dict[str, Any]) -> dict[str, Any]:
    """A typed record (stacks, health, rendezvous, lastwords, nccl...) with every string in
    it redacted: as text wherever it stands (a health note, a stack dump's error, a
    rendezvous listener's name, a frame), and whole under a secret-named key (`{"password":
    ...}`, a list of `api_keys`), as an environment's values are. gputui's own field names
    are none of them secret-named (a test holds it so). Numbers, booleans and keys stay."""

    def walk(v: Any, name: str, depth: int) -> Any:
        if isinstance(v, str):
            return _string(name, v)
        if depth >= _MAX_DEPTH:
            return v
        if isinstance(v, dict):
            return {k: walk(x, k if isinstance(k, str) else name, depth + 1) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, name, depth + 1) for x in v]
        return v

    out: dict[str, Any] = walk(record, "", 0)
    return out
