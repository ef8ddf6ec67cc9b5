"""Command lines can carry secrets too: they are redacted when read, so every view is clean.

The process table, `snapshot --json`, recordings and bundles all take the command line from
the collector, so redacting once at the source covers them all.
"""

from __future__ import annotations

import json
import subprocess
import sys

from gputui.collect.procs.reader import ProcessReader
from gputui.collect.trace.format import process_to_dict

SECRET = "hf_s3cr3tT0kenValue"
PASSWORD = "pw-9f8e7d"


def test_a_token_option_and_url_credentials_never_leave_the_collector():
    argv = [
        sys.executable,
        "-c",
        "import sys; print('ready', flush=True); sys.stdin.read()",
        "--hf-token",
        SECRET,
        f"--db=postgres://trainer:{PASSWORD}@db.internal/runs",
        "--epochs",
        "3",
    ]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        (proc,) = ProcessReader().read({child.pid: ((0,), None)})
        shown = " ".join(proc.cmdline) + json.dumps(process_to_dict(proc))
        assert SECRET not in shown and PASSWORD not in shown
        # What is not secret stays readable, so the command is still recognisable.
        assert "--epochs" in proc.cmdline and "3" in proc.cmdline
        assert "db.internal/runs" in shown
    finally:
        child.kill()
        child.wait(timeout=10)
