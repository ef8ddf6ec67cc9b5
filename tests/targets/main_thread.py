"""Where a target's main thread stands, told to the test that started it.

Why: a test may judge a rank only once the rank stands where the test expects it (inside
its collective, say); a helper thread looks at the main thread's stack and says
`ready <pid>` on stdout then, instead of the test guessing with a sleep.
"""

from __future__ import annotations

import os
import sys
import threading
import time


def announce_when_in(function: str, deadline: float) -> None:
    """Print `ready <pid>` once the main thread's stack holds `function` (bounded by
    `deadline`, a time.monotonic() value; nothing is printed if it never does)."""
    main = threading.main_thread().ident
    while time.monotonic() < deadline:
        f = sys._current_frames().get(main)
        while f is not None:
            if f.f_code.co_name == function:
                print(f"ready {os.getpid()}", flush=True)
                return
            f = f.f_back
        time.sleep(0.005)
