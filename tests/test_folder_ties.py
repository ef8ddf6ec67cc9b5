"""Inside each folder the rooms stand on floors: no two files or sub-folders of one folder
import each other's side, even through others of that folder (issue 44: collect's capped
reader and trace/, diagnose's slow/ and hang/, evidence.py and hang/, hang/ and gone/ did).

test_layout.py refuses a circle of modules; this refuses the looser tie that a circle of
*rooms* is: capped.py importing trace/schema.py while trace/report_reader.py imports
capped.py is no module circle, yet neither side can be read, moved or layered without the
other. What both sides share belongs on a floor below both. Every import counts, also one
inside a function or under TYPE_CHECKING: a lazy import is still a tie.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gputui"
# The ui's straggler widget and tool pane screen are untied in their own change (issue 44).
NOT_YET = {"ui"}


def _module_names(package: Path) -> dict[str, Path]:
    out = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported(path: Path, package: Path, modules: dict[str, Path]) -> set[str]:
    """The gputui modules a file imports, anywhere in it (a name imported from a package
    counts as that submodule when there is one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = ".".join(path.relative_to(package.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules}
    return {m for m in found if m in modules}


def _folders() -> list[Path]:
    return sorted(
        p
        for p in [PACKAGE, *PACKAGE.rglob("*")]
        if p.is_dir() and (p / "__init__.py").exists() and p.name != "__pycache__"
    )


def _rooms_tied_both_ways(folder: Path, package: Path = PACKAGE) -> list[tuple[str, ...]]:
    """Groups of rooms (files and sub-folders of `folder`) that reach each other by imports."""
    modules = _module_names(package)
    pkg = ".".join(folder.relative_to(package.parent).parts)

    def room(module: str) -> str | None:
        if not module.startswith(pkg + "."):
            return None
        return module[len(pkg) + 1 :].split(".")[0]

    arrows: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        if path == folder / "__init__.py":
            continue  # the folder's face hands names on; it is no room
        src = path.relative_to(folder).parts[0].removesuffix(".py")
        for m in _imported(path, package, modules):
            dst = room(m)
            if dst is not None and dst != src:
                arrows.setdefault(src, set()).add(dst)
    reach: dict[str, set[str]] = {}
    for start in arrows:
        seen, todo = set(), [start]
        while todo:
            for nxt in arrows.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        reach[start] = seen
    groups = {tuple(sorted({a, *(b for b in reach[a] if a in reach.get(b, ()))})) for a in reach}
    return sorted(g for g in groups if len(g) > 1)


FOLDERS = [f for f in _folders() if f.relative_to(PACKAGE).parts[:1] not in {(n,) for n in NOT_YET}]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: str(f.relative_to(PACKAGE.parent)))
def test_no_two_rooms_of_a_folder_import_each_other(folder):
    assert _rooms_tied_both_ways(folder) == []


def test_the_check_sees_a_tie_through_a_lazy_import(tmp_path):
    """The rule itself, on a folder made here: b.py imports a.py inside a function."""
    root = tmp_path / "gputui"
    (root / "f").mkdir(parents=True)
    for name, text in {
        "__init__.py": "",
        "f/__init__.py": "",
        "f/a.py": "from gputui.f.b import x\n",
        "f/b.py": "def x():\n    from gputui.f import a\n",
        "f/c.py": "import gputui.f.a\n",
    }.items():
        (root / name).write_text(text)
    assert _rooms_tied_both_ways(root / "f", root) == [("a", "b")]
