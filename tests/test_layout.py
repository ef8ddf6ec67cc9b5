"""The house shows the architecture (docs/architecture.md): each concern in a folder named for
it, every package saying what it owns, no module importing one that imports it back.

import-linter's contracts (tests/test_style.py) keep the layers pointing down; these keep
the rooms: a circle of imports (even one only the type checker follows) would make two
modules one concern that cannot be read apart, and a folder of dozens of modules side by
side hides which ones belong together.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp

PACKAGE = Path(__file__).resolve().parent.parent / "gputui"
# One module per sub-command is the CLI's table of contents: that folder stays flat.
FLAT_BY_DESIGN = {"commands"}
MAX_MODULES = 16


def _circles() -> list[list[str]]:
    """Strongly connected groups of modules (Tarjan), type-checking imports included."""
    graph = grimp.build_graph("gputui", exclude_type_checking_imports=False)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return out


def test_no_module_imports_one_that_imports_it_back():
    assert _circles() == []


def test_every_package_says_what_it_owns():
    for init in PACKAGE.rglob("__init__.py"):
        if "__pycache__" in init.parts:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 40, f"{init.relative_to(PACKAGE.parent)} has no docstring"


def test_no_folder_holds_more_than_about_sixteen_modules():
    for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]:
        if folder.name == "__pycache__" or folder.name in FLAT_BY_DESIGN:
            continue
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= MAX_MODULES, (folder.relative_to(PACKAGE.parent), len(modules))
