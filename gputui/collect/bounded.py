"""One sample with a time limit, for the plain commands that have no sampler thread.

NVML can block for good when a GPU falls off the bus; a command that waits on it must not.
The sample runs in a daemon thread that the command abandons when the limit passes.
"""

from __future__ import annotations

import threading
from typing import Any

from gputui.collect.model import Snapshot
from gputui.collect.source import Source
from gputui.errors import GputuiError


def sample_bounded(source: Source, timeout: float) -> Snapshot | None:
    """One sample in a daemon thread, so a wedged NVML call cannot hang the command."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["snap"] = source.sample()
        except Exception as e:  # reported to the user below
            box["err"] = e

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(timeout)
    if th.is_alive():
        raise GputuiError(
            f"NVML did not answer within {timeout:g} s (a GPU may have fallen off the bus)"
        )
    if "err" in box:
        raise GputuiError(f"sampling failed: {box['err']}")
    return box.get("snap")
