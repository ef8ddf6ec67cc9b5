"""Why a rank is gone: its last words (log tails, error files, kernel lines, core files),
found while it lived or after the fact, explained into ranked findings.
"""

from __future__ import annotations

from gputui.faces import lazy_face

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


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
