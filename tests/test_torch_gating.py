"""Every test that starts torch ranks is gated on torch, so the README's test command passes
without it (issue 43: the flight recorder's fixture failed "rank pid ... exited before PIPE"
and a two-agent torchrun test waited 60 s for "No module named 'torch'").

Read statically, with no torch needed: for each test function, what it starts is its own
body, the fixtures of its module it takes, and the module's constants and helpers it names
(one level). Starting torch is running `import torch` in a child (a script text), `python -m
torch.distributed.run`, or one of tests/targets' torch ranks (gloo_rank, gloo_straggler,
multi_job). A gate is `@needs_torch`/`@pytest.mark.torch`, a skipif whose reason names
torch (tests/conftest.py marks those `torch` too), a module `pytestmark` or
`importorskip("torch")`, or a helper that skips itself (tests/straggler_job.py).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
STARTS_TORCH = re.compile(
    r"^\s*import torch\b|\"torch\.distributed\.run\"|\bGLOO_RANK\b|\bMultiJob\b"
    r"|\bgloo_straggler_job\b|\bGLOO_STRAGGLER\b",
    re.MULTILINE,
)
GATE = re.compile(r"needs_torch|mark\.torch|reason=\"torch is not installed|torch_installed\(\)")
MODULE_GATE = re.compile(
    r"^pytestmark\b[^\n]*(\n[ \]]+[^\n]*){0,6}torch|^pytest\.importorskip\(\"torch\"\)",
    re.MULTILINE,
)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        a.arg for n in ast.walk(node) if isinstance(n, ast.FunctionDef) for a in n.args.args
    }


def _reached(node: ast.AST, top: dict[str, str], tree: ast.Module, text: str) -> list[str]:
    """The sources of the module-level names `node` reaches, through each other."""
    named = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    nodes = {n.name: n for n in tree.body if isinstance(n, named)}
    todo, seen = list(_names(node)), {getattr(node, "name", "")}
    out = []
    while todo:
        name = todo.pop()
        if name in seen or name not in top:
            continue
        seen.add(name)
        out.append(top[name])
        sub = nodes.get(name)
        todo.extend(_names(sub) if sub is not None else re.findall(r"\w+", top[name]))
    return out


def ungated_torch_tests(path: Path) -> list[str]:
    """The test functions of `path` that start torch without a gate."""
    text = path.read_text()
    if MODULE_GATE.search(text):
        return []
    tree = ast.parse(text)
    top: dict[str, str] = {}  # module-level name -> its source (constants, helpers, fixtures)
    for node in tree.body:
        src = ast.get_source_segment(text, node) or ""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            top[node.name] = src
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    top[t.id] = src
    out = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not node.name.startswith("test_"):
            continue
        own = ast.get_source_segment(text, node) or ""
        used = _reached(node, top, tree, text)
        if not any(STARTS_TORCH.search(s) for s in [own, *used]):
            continue
        decorators = "".join(ast.get_source_segment(text, d) or "" for d in node.decorator_list)
        helpers_gate = any("pytest.skip(" in s and "torch" in s for s in used)
        self_skips = any("gloo_straggler_job" in x for x in [own, *used])  # straggler_job.py
        if not (GATE.search(decorators) or helpers_gate or self_skips):
            out.append(node.name)
    return out


def test_every_test_that_starts_torch_is_gated_on_it():
    found = {p.name: ungated_torch_tests(p) for p in sorted(TESTS.glob("test_*.py"))}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_check_finds_what_issue_43_saw(tmp_path):
    """The two tests of the issue, as they were: both would be named."""
    f = tmp_path / "test_x.py"
    f.write_text(
        "import pytest\n"
        "JOB = '''\nimport torch, torch.distributed as dist\n'''\n"
        "@pytest.fixture(scope='module')\n"
        "def gloo_job(tmp_path_factory):\n    run(JOB)\n"
        "def test_flight_recorder(gloo_job):\n    pass\n"
        "def test_two_agents(tmp_path):\n"
        "    argv = [sys.executable, '-m', \"torch.distributed.run\"]\n"
        "@needs_torch\n"
        "def test_gated(gloo_job):\n    pass\n"
        "def test_no_torch():\n    assert 'torch.distributed.run' in text\n"
    )
    assert ungated_torch_tests(f) == ["test_flight_recorder", "test_two_agents"]


@pytest.mark.torch
def test_a_torch_marked_test_runs_only_with_torch():
    """Without torch, tests/conftest.py skips this before it runs, with the reason."""
    import importlib.util

    assert importlib.util.find_spec("torch") is not None
