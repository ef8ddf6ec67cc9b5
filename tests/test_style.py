"""The codebase rules, checked with every test run: ruff, and the layers of docs/architecture.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO


def _tool(name: str) -> str:
    """The console script installed beside this Python (the venv's), as CI installs it."""
    return str(Path(sys.executable).parent / name)


def test_ruff_is_clean():
    r = subprocess.run(
        [_tool("ruff"), "check", "gputui", "tests", "scripts", "bench"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_collect_diagnose_tools_and_probe_never_import_textual():
    exe = _tool("lint-imports")
    if not Path(exe).exists():
        pytest.fail("import-linter is not installed (pip install -e '.[dev]')")
    r = subprocess.run([exe], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
