"""Redaction of what a recording says about processes, as it is read.

Live command lines are redacted where /proc is read (gputui.collect.procs), but a recording
is anyone's file: written by an older gputui, by hand, or by someone else's tool. Without
this, `snapshot --replay --json` printed its secrets and `bundle --replay` copied them. The
same command lines come back on every sample, so the result is cached.
"""

from __future__ import annotations

from functools import lru_cache

from gputui.redact import redact_argv, redact_text


@lru_cache(maxsize=4096)
def recorded_argv(args: tuple[str, ...], program: str | None = None) -> tuple[str, ...]:
    """A recorded command line with secrets redacted (`program`: the recorded name)."""
    return tuple(redact_argv(args, program))


@lru_cache(maxsize=4096)
def recorded_text(text: str | None) -> str | None:
    """A recorded parent command line (one string) with secrets redacted."""
    return redact_text(text) if text else text
