"""One sample with a time limit, for the plain commands that have no sampler thread.

The live source bounds its own NVML calls (nvml_thread.py) and says which call hung; this
outer bound is for the rest of a sample (psutil reading /proc, which can block on a process
stuck in the kernel). It waits a little longer than `timeout`, so that NVML's own, more
precise message wins when NVML is what hangs. A command being stopped (SIGTERM, Ctrl-C)
passes `stop`, and the wait ends as soon as it is set.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from gputui.collect.model import Snapshot
from gputui.collect.source import Source
from gputui.errors import GputuiError

GRACE_S = 0.5  # how much longer than `timeout` the outer wait lasts
STOP_POLL_S = 0.05  # how often a wait with `stop` looks at it


def sample_bounded(
    source: Source, timeout: float, stop: threading.Event | None = None
) -> Snapshot | None:
    """One sample in a daemon thread, so a wedged call cannot hang the command.

    Returns None when the source has run out, or when `stop` was set before the sample
    came. Raises GputuiError (exit 2) when the sample failed or did not come in time.

    Args:
        source: where the sample comes from (live, a replay).
        timeout: seconds to wait for the sample before giving up.
        stop: set by the caller to give up early (Ctrl-C, SIGTERM); None: wait for `timeout`.

    Returns:
        The Snapshot, or None when the source has run out or `stop` was set first.

    Raises:
        GputuiError: the sample failed or did not come within `timeout` (exit 2).
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["snap"] = source.sample()
        except Exception as e:  # reported to the user below
            box["err"] = e
        finally:
            done.set()

    th = threading.Thread(target=target, name="gputui-sample", daemon=True)
    th.start()
    deadline = time.monotonic() + timeout + GRACE_S
    while not done.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            raise GputuiError(
                f"one sample did not finish within {timeout:g} s "
                "(reading the processes from /proc, or NVML, is blocked)"
            )
        if stop is None:
            done.wait(left)
        elif stop.is_set():
            return None
        else:
            done.wait(min(left, STOP_POLL_S))
    err = box.get("err")
    if isinstance(err, GputuiError):
        raise err  # NvmlHung and friends: already one line for the user
    if err is not None:
        raise GputuiError(f"sampling failed: {err}")
    return box.get("snap")
