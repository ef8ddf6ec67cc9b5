"""Where a module spells a verdict state as a string: the rule tests/test_states.py holds.

A state is spelled when one of its words ("ok", "busy", "slow", "stalled", "hung") is a
string literal used *as a state*:

- compared with something named for a state (`v.state == "ok"`, `r.worst != "ok"`,
  `state in ("stalled", "hung")`);
- passed or stored as one (`state="hung"`, `{"state": "ok"}`);
- listed with another, different state word (`("stalled", "hung")`, `{"ok": 0, "hung": 1}`):
  a table or a set of states kept on the side.

The same words mean other things elsewhere, and those are no hit: NVML's status "hung" (a
driver call that did not return), a probe pair's "ok" field, a health word "ok" beside
"degraded", a GPU tag "busy". The rule reads the syntax tree, so comments and docstrings
are no hit either. `python -m tests.state_literals [DIR]` prints every hit under DIR.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

WORDS = frozenset({"ok", "busy", "slow", "stalled", "hung"})
STATE_NAMES = ("state", "worst")  # what a thing that holds a verdict state is called


def _words(node: ast.AST) -> list[str]:
    """The state words a literal holds: a string, or a tuple/list/set of strings."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value in WORDS else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [w for e in node.elts for w in _words(e) if isinstance(e, ast.Constant)]
    return []


def _names_a_state(node: ast.AST) -> bool:
    """`state`, `v.state`, `r.worst`: an expression whose last name says it holds a state."""
    if isinstance(node, ast.Name):
        return node.id.lower().endswith(STATE_NAMES)
    if isinstance(node, ast.Attribute):
        return node.attr.lower().endswith(STATE_NAMES)
    return False


def hits(tree: ast.AST) -> Iterator[int]:
    """Line numbers where a state word is spelled as a state (the rules above)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_words(s) for s in sides) and any(_names_a_state(s) for s in sides):
                yield node.lineno
        elif isinstance(node, ast.keyword) and node.arg in STATE_NAMES and _words(node.value):
            yield node.value.lineno
        elif isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
            if len({w for k in keys for w in _words(k)}) >= 2:
                yield node.lineno
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value in STATE_NAMES and _words(v):
                    yield v.lineno
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(set(_words(node))) >= 2:
            yield node.lineno


def spelled(root: Path) -> dict[str, list[int]]:
    """Every module under `root` that spells a state, with the lines (relative paths)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        lines = sorted(set(hits(ast.parse(path.read_text(encoding="utf-8")))))
        if lines:
            found[str(path.relative_to(root))] = lines
    return found


if __name__ == "__main__":
    where = Path(sys.argv[1] if len(sys.argv) > 1 else "gputui")
    found = spelled(where)
    for name, lines in found.items():
        print(f"{name}: {', '.join(map(str, lines))}")
    print(f"{len(found)} module(s) spell a verdict state as a string")
