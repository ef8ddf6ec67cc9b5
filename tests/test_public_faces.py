"""Each package of gputui/ that declares a public face (`__all__` in its `__init__.py`) keeps
it true: every name resolves, importing the package imports none of its modules (the names
come on first use, so the dashboard's first frame imports only what it shows), and every
function of a face says what each of its arguments is and what it returns (Google style),
so that a caller in another layer can use it without reading its body.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "gputui"


def _faces() -> list[str]:
    """Every package whose __init__.py assigns `__all__`, as a dotted name."""
    found = []
    for init in sorted(PKG.rglob("__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        if any(
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            for node in tree.body
        ):
            found.append(".".join(init.parent.relative_to(REPO).parts))
    return found


FACES = _faces()


def test_the_faces_are_declared():
    # the packages issue 44 gave a face; a face that disappears fails here
    for pkg in [
        "gputui.redact",
        "gputui.collect",
        "gputui.collect.nvml",
        "gputui.collect.procs",
        "gputui.collect.prom",
        "gputui.collect.nccl",
        "gputui.diagnose",
        "gputui.diagnose.health",
        "gputui.diagnose.gone",
        "gputui.diagnose.merge",
        "gputui.diagnose.history",
        "gputui.diagnose.nccl",
        "gputui.tools",
        "gputui.tools.attach",
        "gputui.tools.gather",
        "gputui.tools.bundle",
        "gputui.tools.fleet",
        "gputui.probe",
        "gputui.exporter",
    ]:
        assert pkg in FACES


@pytest.mark.parametrize("pkg", FACES)
def test_every_name_of_a_face_resolves_inside_its_package(pkg: str):
    module = importlib.import_module(pkg)
    names = list(module.__all__)
    assert len(names) == len(set(names)), f"{pkg}.__all__ names one twice"
    for name in names:
        value = getattr(module, name)  # AttributeError: the face names what is gone
        home = getattr(value, "__module__", None)
        if (inspect.isfunction(value) or inspect.isclass(value)) and home.startswith("gputui"):
            # a face hands on its own package's names (an alias of threading.Event may stand)
            assert home == pkg or home.startswith(pkg + "."), (name, home)
        assert name in dir(module)
    with pytest.raises(AttributeError):
        module.no_such_name_in_any_face  # noqa: B018


def test_importing_a_package_imports_none_of_its_modules():
    """In a fresh interpreter: import every package with a face, then list the gputui
    modules loaded. Only packages may be there (and redact's own rules, which its face
    defines eagerly: they are the face), and gputui.faces, the one helper every face uses."""
    code = (
        "import importlib, json, sys\n"
        f"for p in {FACES!r}: importlib.import_module(p)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('gputui'))))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert r.returncode == 0, r.stderr
    loaded = json.loads(r.stdout)
    packages = {".".join(p.parent.relative_to(REPO).parts) for p in PKG.rglob("__init__.py")}
    redact_rules = {f"gputui.redact.{m}" for m in ("names", "scan", "tools", "formats")}
    redact_rules |= {"gputui.redact.rules", "gputui.redact.keyformats"}
    assert sorted(set(loaded) - packages - redact_rules - {"gputui.faces"}) == []


def _face_functions() -> list[tuple[str, str, Any]]:
    out = []
    for pkg in FACES:
        module = importlib.import_module(pkg)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isfunction(value):
                out.append((pkg, name, value))
    return out


def _section(doc: str, title: str) -> str | None:
    """The text of a Google-style section (`Args:`), up to the next section or the end."""
    m = re.search(rf"^\s*{title}:\s*$(.*?)(?=^\s*[A-Z][a-z]+:\s*$|\Z)", doc, re.M | re.S)
    return m.group(1) if m else None


@pytest.mark.parametrize(
    "pkg,name,fn", _face_functions(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_every_function_of_a_face_says_its_args_and_what_it_returns(pkg, name, fn):
    doc = inspect.getdoc(fn) or ""
    assert doc, f"{pkg}.{name} has no docstring"
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")]
    if params:
        args = _section(doc, "Args")
        assert args is not None, f"{pkg}.{name}: no 'Args:' section"
        for p in params:
            stars = {p.VAR_POSITIONAL: r"\*", p.VAR_KEYWORD: r"\*\*"}.get(p.kind, "")
            assert re.search(rf"^\s+{stars}{p.name}\b.*:", args, re.M), (
                f"{pkg}.{name}: argument {p.name!r} is not in its 'Args:'"
            )
    returns = inspect.signature(fn).return_annotation
    if returns not in (None, "None", inspect.Signature.empty):
        word = "Yields" if inspect.isgeneratorfunction(fn) else "Returns"
        assert _section(doc, word) is not None, f"{pkg}.{name}: no '{word}:' section"
