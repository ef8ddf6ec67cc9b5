"""The world probe's last step on every host: nothing of the run may still be running.

Why a check and not a hope: the worker's watchdog kills its group at its deadline or when ssh
goes away, but a host that was cut off mid-run is exactly where that may not have happened
yet. The parent runs this over the same launcher on every host after the probe.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path


def reap(token: str) -> int:
    """`--world-reap TOKEN`: kill any process of that run still here; print what was found.

    The final check of the parent, run over the same launcher on every host: a run's ranks
    are forks of its host worker, so they all carry `--world-worker` and the token in argv.
    """
    found = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            with (d / "cmdline").open("rb") as f:
                cmd = f.read(1 << 16)
        except OSError:
            continue
        if b"--world-worker" in cmd and token.encode() in cmd:
            found.append(int(d.name))
            try:
                os.kill(int(d.name), signal.SIGKILL)
            except OSError:
                pass
    print(json.dumps({"event": "reap", "found": found}))
    return 0
