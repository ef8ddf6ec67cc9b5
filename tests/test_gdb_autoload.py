"""`dump --gdb` shows the backtrace, not gdb's auto-load warning above it.

A script beside a library (libpython's `-gdb.py`) outside gdb's safe path made gdb print a
ten-line "auto-loading has been declined" block before the threads; gputui no longer asks gdb
to auto-load such scripts. The target here is a real program with such a script beside it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import run_cli

needs_gdb = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")


@needs_gdb
def test_the_backtrace_comes_without_the_auto_load_warning(tmp_path):
    exe = tmp_path / "sleepy"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", exe)
    (tmp_path / "sleepy-gdb.py").write_text('print("auto-loaded")\n')
    target = subprocess.Popen([str(exe), "60"])
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{target.pid}/exe").resolve() != exe.resolve():  # exec'd
            assert time.monotonic() < deadline
            time.sleep(0.05)
        r = run_cli("dump", "--gdb", str(target.pid), timeout=120)
        out = r.stdout + r.stderr
        if r.returncode != 0 and "permission" in out:
            pytest.skip("ptrace is not allowed here")
        assert "#0 " in out, out
        assert "auto-loading has been declined" not in out
        assert "auto-loaded" not in out  # nor run: a script beside a library is not trusted
    finally:
        target.kill()
        target.wait(timeout=10)
