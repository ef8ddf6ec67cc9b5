"""Waiting on a condition with a deadline, for tests that start real processes.

Why: a test never sleeps for synchronization; it polls the condition it needs (a rank's
stream found, a job gone) and fails with its own message if the deadline passes. The
default deadline is generous, for a loaded 2-core CI box: a true condition returns at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(cond: Callable[[], object], timeout: float = 60.0, every: float = 0.05) -> bool:
    """Whether `cond()` became true within `timeout` seconds (asked once more at the end)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(every)
    return bool(cond())
