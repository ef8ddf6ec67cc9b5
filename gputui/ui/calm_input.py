"""Textual's input thread, woken twice a second instead of ten times while no key comes.

Why: Textual's Linux driver waits for keys with select() and a 0.1 s timeout, so that an
escape sequence cut short (a lone Escape) is flushed as a key soon; at rest that is ten
wake-ups a second, 0.13 % of a core on the CPU box: a fifth of the dashboard's whole CPU at
rest (BENCHMARKS.md, section 14). Here the wait is stretched to IDLE_WAIT_S once no input
came for QUIET_AFTER_S, and it is Textual's own 0.1 s again as soon as any byte comes: a
lone Escape still resolves in 0.1 s, a key is read the moment it comes (select returns on
input whatever its timeout). The one thing that waits longer: the app ending without any
key pressed in the last second waits up to IDLE_WAIT_S for that thread.

How: the driver module's own `selectors` name is given a SelectSelector whose select()
stretches the timeout; none of Textual's code is copied, and a Textual that waits some
other way is left as it is (nothing is saved, nothing breaks).
"""

from __future__ import annotations

import selectors
import time
import types
from typing import Any

IDLE_WAIT_S = 0.5  # the longest wait while nothing is typed
QUIET_AFTER_S = 1.0  # no input for this long: the waits get long


class CalmSelector(selectors.SelectSelector):
    """select() with a longer timeout while no input has come for a while."""

    def __init__(self) -> None:
        super().__init__()
        self.last_input = time.monotonic()
        self.waits = 0  # select() calls, for tests

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.waits += 1
        if timeout is not None and time.monotonic() - self.last_input > QUIET_AFTER_S:
            timeout = max(timeout, IDLE_WAIT_S)
        ready = super().select(timeout)
        if ready:
            self.last_input = time.monotonic()
        return ready


def calm_input() -> bool:
    """Textual's Linux driver waits with CalmSelector from now on; False where it does not
    wait with selectors.SelectSelector (another Textual, another platform)."""
    try:
        from textual.drivers import linux_driver
    except Exception:  # not a POSIX terminal driver here
        return False
    mod: Any = getattr(linux_driver, "selectors", None)
    if mod is selectors:
        shim = types.SimpleNamespace(**{k: getattr(selectors, k) for k in dir(selectors)})
        shim.SelectSelector = CalmSelector
        linux_driver.selectors = shim  # type: ignore[assignment]
        return True
    return getattr(mod, "SelectSelector", None) is CalmSelector  # done before
