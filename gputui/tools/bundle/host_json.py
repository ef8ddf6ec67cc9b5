"""host.json of a bundle: the node it describes, and what wrote it.

A bundle written on the node names the kernel, the Python, the user's rights to attach
(euid, ptrace_scope, CAP_SYS_PTRACE) and the attach tools present: whoever reads it later
knows why a stack is missing. A bundle made from a recording describes the recorded node
and nothing of the machine that wrote it (its kernel, tools and settings would describe
another node).
"""

from __future__ import annotations

import os
import sys
from datetime import datetime
from typing import Any

from gputui import __version__
from gputui.collect.model import Snapshot
from gputui.tools.attach import ptrace
from gputui.tools.which import available_tools


def live_host(
    host: str, last: Snapshot | None, samples: int, tool_path: str | None
) -> dict[str, Any]:
    """host.json of a bundle written on the node itself."""
    u = os.uname()
    return {
        "hostname": host,
        "kernel": f"{u.sysname} {u.release} {u.machine}",
        "written_at": datetime.now().isoformat(timespec="seconds"),
        "gputui": __version__,
        "python": sys.version.split()[0],
        "euid": os.geteuid(),
        "ptrace_scope": ptrace.ptrace_scope(),
        "cap_sys_ptrace": ptrace.has_cap_sys_ptrace(),
        "tools": available_tools(tool_path),
        "driver": last.driver if last else None,
        "source": last.source if last else None,
        "samples": samples,
    }


def recorded_host(
    host: str, made_from: str | None, last: Snapshot | None, samples: int
) -> dict[str, Any]:
    """host.json of a bundle made from a recording: the recorded node, what it was made
    from and by which gputui; none of the writing machine's kernel, tools or settings."""
    return {
        "hostname": host,
        "made_from": made_from or "a recording",
        "written_at": datetime.now().isoformat(timespec="seconds"),
        "written_by": f"gputui {__version__}",
        "driver": last.driver if last else None,
        "source": "replay",
        "samples": samples,
    }
