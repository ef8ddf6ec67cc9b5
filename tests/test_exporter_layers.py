"""The exporter is a face beside the UI and the CLI (docs/architecture.md): it reads collect and
diagnose, and imports neither Textual, the UI, the commands, the attach tools nor the probe."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("textual", "gputui.ui", "gputui.commands", "gputui.tools", "gputui.probe")

CODE = """
import importlib, json, pkgutil, sys
import gputui.exporter as e
for m in pkgutil.iter_modules(e.__path__):
    importlib.import_module(f"gputui.exporter.{m.name}")
forbidden = tuple(sys.argv[1:])
print(json.dumps(sorted(m for m in sys.modules if m.startswith(forbidden))))
"""


def test_the_exporter_package_imports_no_other_face_and_no_tool():
    r = subprocess.run(
        [sys.executable, "-c", CODE, *FORBIDDEN], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []
