"""Why a rank is gone: its last words (log tails, error files, kernel lines, core files),
found while it lived or after the fact, explained into ranked findings.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "crashed_cores",
    "explain_lastwords",
    "job_ended",
    "live_timeouts",
    "parse_error_file",
    "parse_log",
    "ranks_words",
    "words_of",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "job_ended": "ended",
    "crashed_cores": "explain",
    "explain_lastwords": "explain",
    "words_of": "explain",
    "parse_error_file": "lastwords",
    "parse_log": "lastwords",
    "live_timeouts": "watchdog",
    "ranks_words": "watchdog",
}


def __getattr__(name: str) -> Any:
    """A name of the face, imported on first use (PEP 562): importing one module of this
    package (the dashboard's first frame imports a few) does not import the others."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
