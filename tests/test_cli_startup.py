"""Building the argument parser imports no heavy module: start-up pays only for the command run.

`gputui --help`, and the parse that precedes every command, must not import psutil, NVML,
Textual, torch or the detector; each command imports what it needs inside its `run()`.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "psutil",
    "pynvml",
    "textual",
    "rich",
    "torch",
    "gputui.collect.trace.format",
    "gputui.collect.live",
    "gputui.diagnose.hang.detector",
    "gputui.tools.attach.dumpall",
    "gputui.ui.app",
)


def test_building_the_parser_imports_no_heavy_module():
    code = (
        "import sys, json; from gputui.cli import build_parser; build_parser(); "
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []
