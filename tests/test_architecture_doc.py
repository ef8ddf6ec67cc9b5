"""docs/architecture.md tells the truth about the code: it is the first page a newcomer reads,
and a picture of the layers that has drifted from the imports sends every change to the
wrong floor.

Three things are held against the code: every file or folder the page names (in backticks)
exists, and a `file.py:name` is defined there; every package and top-level module of
gputui/ is named on the page; and the page's table of layers is the order of the `layers`
contract in pyproject.toml, which import-linter (tests/test_style.py) checks against the
imports themselves.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "gputui"
DOC = REPO / "docs" / "architecture.md"

# A path in backticks: folders end in "/", modules in ".py", optionally ":name".
_PATH = re.compile(r"^(?P<path>[\w./]*\w(?:/|\.py|\.toml|\.md))(?::(?P<name>\w+))?$")


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _named_paths(text: str) -> list[tuple[str, str | None]]:
    """Every `path` or `path.py:name` in backticks, in the order the page names them."""
    found = []
    for token in re.findall(r"`([^`\n]+)`", text):
        m = _PATH.match(token)
        if m:
            found.append((m.group("path"), m.group("name")))
    return found


def _on_disk(path: str) -> Path:
    """A path as the page writes it: from the repository root when it starts there
    (`tests/`, `gputui/`, `docs/`, `pyproject.toml`), else inside gputui/."""
    at_root = path.split("/")[0] in {"gputui", "tests", "docs", "bench", "scripts"}
    if at_root or (REPO / path).is_file():
        return REPO / path
    return PKG / path


def _defines(module: Path, name: str) -> bool:
    """Whether a module defines `name` at its top level (a def, a class or an assignment)."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
    return False


def _relative(path: Path) -> str:
    return str(path.relative_to(PKG)).replace("\\", "/")


def test_every_file_and_folder_the_page_names_exists():
    missing = []
    for path, name in _named_paths(_doc()):
        where = _on_disk(path)
        if not where.exists():
            missing.append(path)
        elif name and not _defines(where, name):
            missing.append(f"{path}:{name}")
    assert missing == [], f"docs/architecture.md names what is gone: {missing}"


def test_every_package_and_top_level_module_of_gputui_is_on_the_page():
    named = {path for path, _ in _named_paths(_doc())}
    packages = {
        _relative(init.parent) + "/"
        for init in PKG.rglob("__init__.py")
        if init.parent != PKG and "__pycache__" not in init.parts
    }
    modules = {p.name for p in PKG.glob("*.py") if p.name != "__init__.py"}
    assert sorted((packages | modules) - named) == []


def _doc_layers() -> list[list[str]]:
    """The table under '## The layers', top first: each row's packages as module names,
    with the separator that joins them ('|' independent, ':' not)."""
    section = _doc().split("## The layers", 1)[1].split("\n## ", 1)[0]
    layers = []
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        row = cells[1].replace("\\|", " | ")
        words = re.findall(r"`([^`]+)`|(\||:)", row)
        layers.append([w or sep for w, sep in words])
    return layers


def _module_name(word: str) -> str:
    """`collect/` -> gputui.collect, `cli.py` -> gputui.cli; separators stay as they are."""
    if word in {"|", ":"}:
        return word
    return "gputui." + word.removesuffix("/").removesuffix(".py").replace("/", ".")


def _contract_layers() -> list[list[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layered,) = [c for c in contracts if c["type"] == "layers"]
    return [re.findall(r"[\w.]+|\||:", layer) for layer in layered["layers"]]


def test_the_table_of_layers_is_the_order_import_linter_checks():
    page = [[_module_name(w) for w in row] for row in _doc_layers()]
    assert page, "docs/architecture.md has no table under '## The layers'"
    assert page == _contract_layers()


def test_the_layer_numbers_count_down_from_the_top():
    section = _doc().split("## The layers", 1)[1].split("\n## ", 1)[0]
    numbers = [int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)]
    assert numbers == list(range(len(numbers), 0, -1))
