"""Only gputui/ui speaks to Textual: every other face (check, snapshot, the exporter) and the
command line that starts the dashboard work without it (docs/architecture.md, the layers)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "gputui"


def textual_imports(path: Path) -> list[int]:
    """Line numbers of `import textual...` / `from textual... import` in one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "textual" for a in node.names
        ):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "textual":
            lines.append(node.lineno)
    return lines


def test_no_module_outside_ui_imports_textual_even_inside_a_function():
    outside = [p for p in PKG.rglob("*.py") if PKG / "ui" not in p.parents]
    found = {str(p.relative_to(PKG)): n for p in outside if (n := textual_imports(p))}
    assert found == {}
