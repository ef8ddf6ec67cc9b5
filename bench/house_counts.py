"""The house, counted: in how many places each thing issue 44 names is written.

Why: issue 44 is a refactor whose success is a count going down (the detector built in 4
places, `--stall-after` through 13 signatures...). A count taken by eye drifts with who
takes it; here each comes from one rule, written below, so the BEFORE column (the base
commit) and the AFTER column (after the merges) are counted the same way:

    python bench/house_counts.py                     # this checkout
    python bench/house_counts.py --tree /tmp/base    # another tree (a `git worktree`)
    python bench/house_counts.py --json              # one JSON object
    python bench/house_counts.py --where             # and each count's places

The rules read `gputui/**.py` with `ast` (imports inside functions count; docstrings do not).

- `detector_built` / `watcher_built`: calls whose callee is the name `Detector` /
  `Watcher` (or an attribute of that name).
- `detector_loops`: loops (`for`, `while`, comprehensions) that call `.update(...)` on a
  detector or watcher: a name bound in the same module to a `Detector(`/`Watcher(` call,
  or an expression whose text ends in `detector` or `watcher` (`self.watcher.update(s)`).
  A nested loop counts once (the outermost).
- `pacing_loops`: `while`/`for` loops whose body calls both a sample (a callee named
  `sample`, `sample_*` or `*_sample`) and a wait (`sleep`, or `.wait(` with an argument).
- `stall_after_signatures`: function definitions with a parameter named `stall_after`;
  `stall_after_files`: files whose code (not docstrings) names `stall_after`.
- `state_literal_modules`: modules that spell a verdict state ("ok", "stalled", "hung",
  "slow", "busy") as a string constant where it is used as a verdict state: an operand of a
  comparison (alone or inside a tuple/list/set operand) whose other side's text contains
  `state` or `worst`; the value of an assignment or keyword whose target's name contains
  `state`; or a tuple, list, set or dict literal (keys) holding two of the words or more
  (a collection or table of states). NVML's reader status ("ok"/"hung") compared with
  `status` is another vocabulary and is not counted.
- `key_declarations`: places in gputui/ui that declare a key: each `Binding(` call and each
  tuple in a list assigned to `BINDINGS`; each entry of a dict literal keyed by a binding's
  action or id (the help screen's labels); each (key, label) pair of a module-level
  sequence whose name holds KEY, HINT or OFFER (the key bar's offers); each (key, label)
  pair passed to a call named `offer_first` (ad hoc offers); each string constant that
  says `press X`.
- `host_list_parsers`: definitions named `_hosts`, `expand_hosts` or `parse_hosts`;
  `record_kind_functions`: definitions named `kind_of` or `_kind`; `ssh_launchers`: files
  whose code holds the string `BatchMode=` (the option that makes an ssh argument list).
- `two_way_ties`: inside each folder of gputui/, its files and sub-folders are the units;
  A -> B when a file in A imports a module in B. A pair of units that import each other is
  one tie (`two_way_ties_where` names them).
- `files_over_400`: files of gputui/ over 400 lines; `textual_outside_ui`: files outside
  gputui/ui that import textual; `unparsed`: files that do not parse.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

STATES = frozenset({"ok", "stalled", "hung", "slow", "busy"})
_PRESS = re.compile(r"\bpress [A-Za-z?/]\b")


def _calls(node: ast.AST) -> Iterator[ast.Call]:
    return (n for n in ast.walk(node) if isinstance(n, ast.Call))


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constants that are docstrings (not code)."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            v = body[0].value
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out.add(id(v))
    return out


def _strings(tree: ast.AST) -> Iterator[str]:
    """Every string constant of the code, docstrings left out."""
    return (str(n.value) for n in _string_constants(tree))


def _functions(tree: ast.AST) -> Iterator[ast.AST]:
    yield tree
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield n


_LOOPS = (
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _outer_loops(node: ast.AST) -> Iterator[ast.AST]:
    """The loops under `node` that no other loop under it holds."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _LOOPS):
            yield child
        else:
            yield from _outer_loops(child)


def detector_loops(tree: ast.AST) -> list[int]:
    built: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
            if _callee(n.value) in ("Detector", "Watcher"):
                built |= {t.id for t in n.targets if isinstance(t, ast.Name)}

    def runs(loop: ast.AST) -> bool:
        for c in _calls(loop):
            if isinstance(c.func, ast.Attribute) and c.func.attr == "update":
                owner = ast.unparse(c.func.value)
                if owner in built or owner.lower().endswith(("detector", "watcher")):
                    return True
        return False

    return [loop.lineno for loop in _outer_loops(tree) if runs(loop)]  # type: ignore[attr-defined]


def pacing_loops(tree: ast.AST) -> list[int]:
    def paces(loop: ast.AST) -> bool:
        names = [(_callee(c), c) for c in _calls(loop)]
        samples = any(
            n == "sample" or n.startswith("sample_") or n.endswith("_sample") for n, _ in names
        )
        waits = any(n == "sleep" or (n == "wait" and (c.args or c.keywords)) for n, c in names)
        return samples and waits

    loops = [n for n in _outer_loops(tree) if isinstance(n, (ast.For, ast.While))]
    return [n.lineno for n in loops if paces(n)]


def stall_after_signatures(tree: ast.AST) -> list[int]:
    out = []
    for f in ast.walk(tree):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = f.args
            if any(p.arg == "stall_after" for p in a.posonlyargs + a.args + a.kwonlyargs):
                out.append(f.lineno)
    return out


def names_stall_after(tree: ast.AST) -> bool:
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id == "stall_after":
            return True
        if isinstance(n, ast.Attribute) and n.attr == "stall_after":
            return True
        if isinstance(n, (ast.arg, ast.keyword)) and n.arg == "stall_after":
            return True
    return any("stall_after" in s for s in _strings(tree))


def _state_words(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in STATES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_state_words(e) for e in node.elts)
    return False


def spells_states(tree: ast.AST) -> bool:
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            for i, side in enumerate(sides):
                others = sides[:i] + sides[i + 1 :]
                if _state_words(side) and any(
                    w in ast.unparse(o) for o in others for w in ("state", "worst")
                ):
                    return True
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if n.value is not None and _state_words(n.value):
                if any("state" in ast.unparse(t).lower() for t in targets):
                    return True
        elif isinstance(n, ast.keyword):
            if n.arg and "state" in n.arg and _state_words(n.value):
                return True
        if isinstance(n, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
            elts = n.keys if isinstance(n, ast.Dict) else n.elts
            words = [e.value for e in elts if isinstance(e, ast.Constant)]
            if len(STATES.intersection(w for w in words if isinstance(w, str))) >= 2:
                return True
    return False


def _binding_names(trees: dict[Path, ast.AST]) -> set[str]:
    """The actions and ids of every Binding( of the tree: the keys of a help-label table."""
    out: set[str] = set()
    for tree in trees.values():
        for c in _calls(tree):
            if _callee(c) == "Binding":
                if len(c.args) > 1 and isinstance(c.args[1], ast.Constant):
                    out.add(str(c.args[1].value))
                for k in c.keywords:
                    if k.arg in ("id", "action") and isinstance(k.value, ast.Constant):
                        out.add(str(k.value.value))
    return out


def _pairs(node: ast.AST) -> list[int]:
    """Lines of the (key, label) tuples of two string constants inside `node`."""
    return [
        e.lineno
        for e in ast.walk(node)
        if isinstance(e, ast.Tuple)
        and len(e.elts) == 2
        and all(isinstance(x, ast.Constant) and isinstance(x.value, str) for x in e.elts)
    ]


def _string_constants(tree: ast.AST) -> Iterator[ast.Constant]:
    docs = _docstrings(tree)
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            yield n


def key_declarations(tree: ast.AST, actions: set[str]) -> list[int]:
    out: list[int] = []
    for c in _calls(tree):
        name = _callee(c)
        if name == "Binding":
            out.append(c.lineno)
        if name == "offer_first":
            out += [n for a in c.args for n in _pairs(a)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if "BINDINGS" in names and isinstance(node.value, (ast.List, ast.Tuple)):
                out += [e.lineno for e in node.value.elts if isinstance(e, ast.Tuple)]
        if isinstance(node, ast.Dict):
            hits = [
                k.lineno
                for k in node.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value in actions
            ]
            out += hits if len(hits) >= 2 else []
    if isinstance(tree, ast.Module):
        for stmt in tree.body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if any(w in nm.upper() for nm in names for w in ("KEY", "HINT", "OFFER")):
                    if isinstance(stmt.value, (ast.Tuple, ast.List)):
                        out += _pairs(stmt.value)
    out += [n.lineno for n in _string_constants(tree) if _PRESS.search(str(n.value))]
    return sorted(out)


def defs_named(tree: ast.AST, names: set[str]) -> list[int]:
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in names
    ]


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Every module name an import statement of the file names (`from a import b` gives
    `a` and `a.b`: b may be a module)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            yield from (a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                pkg = module.split(".") if is_package else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - (n.level - 1)] if n.level > 1 else pkg
                base = ".".join([*pkg, base] if base else pkg)
            yield base
            yield from (f"{base}.{a.name}" for a in n.names)


def two_way_ties(trees: dict[Path, ast.AST], root: Path) -> list[str]:
    """`folder: A <-> B` for each pair of units of one folder that import each other."""
    known = {_module_name(p, root): p for p in trees}
    edges: set[tuple[str, str]] = set()  # (file A, file B): A imports B
    for path, tree in trees.items():
        mod = _module_name(path, root)
        for name in _imports(tree, mod, path.name == "__init__.py"):
            target = known.get(name)
            if target is not None and target != path:
                edges.add((str(path.relative_to(root)), str(target.relative_to(root))))
    units: set[tuple[str, str, str]] = set()  # (folder, unit of A, unit of B)
    for a, b in edges:
        pa, pb = Path(a).parts, Path(b).parts
        k = 0
        while k < min(len(pa), len(pb)) - 1 and pa[k] == pb[k]:
            k += 1
        folder = "/".join(pa[:k])
        ua, ub = pa[k], pb[k]
        if ua == "__init__.py" or ub == "__init__.py" or ua == ub:
            continue  # a folder's face hands names on; it is not a unit of the folder
        units.add((folder, ua.removesuffix(".py"), ub.removesuffix(".py")))
    return sorted(f"{d}: {a} <-> {b}" for d, a, b in units if (d, b, a) in units and a < b)


def _textual(tree: ast.AST) -> bool:
    return any(n == "textual" or n.startswith("textual.") for n in _imports(tree, "", False))


def where(tree_dir: Path) -> dict[str, list[str]]:
    """Each count's places: `path:line` (a file alone for a count of files)."""
    root = tree_dir
    trees: dict[Path, ast.AST] = {}
    where: dict[str, list[str]] = {k: [] for k in KEYS}
    for f in sorted((root / "gputui").rglob("*.py")):
        text = f.read_text(encoding="utf-8", errors="replace")
        rel = str(f.relative_to(root))
        if text.count("\n") + (not text.endswith("\n") and bool(text)) > 400:
            where["files_over_400"].append(rel)
        try:
            trees[f] = ast.parse(text, filename=rel)
        except SyntaxError:
            where["unparsed"].append(rel)
    ui = root / "gputui" / "ui"
    actions = _binding_names({p: t for p, t in trees.items() if ui in p.parents})
    for f, t in trees.items():
        rel = str(f.relative_to(root))

        def at(key: str, lines: list[int], rel: str = rel) -> None:
            where[key] += [f"{rel}:{n}" for n in lines]

        for c in _calls(t):
            if _callee(c) in ("Detector", "Watcher"):
                at(f"{_callee(c).lower()}_built", [c.lineno])
        at("detector_loops", detector_loops(t))
        at("pacing_loops", pacing_loops(t))
        at("stall_after_signatures", stall_after_signatures(t))
        at("host_list_parsers", defs_named(t, {"_hosts", "expand_hosts", "parse_hosts"}))
        at("record_kind_functions", defs_named(t, {"kind_of", "_kind"}))
        for key, hit in (
            ("stall_after_files", names_stall_after(t)),
            ("state_literal_modules", spells_states(t)),
            ("ssh_launchers", any("BatchMode=" in s for s in _strings(t))),
            ("textual_outside_ui", ui not in f.parents and _textual(t)),
        ):
            if hit:
                where[key].append(rel)
        if ui in f.parents:
            at("key_declarations", key_declarations(t, actions))
    where["two_way_ties"] = two_way_ties(trees, root)
    return where


KEYS = (
    "detector_built", "watcher_built", "detector_loops", "pacing_loops",
    "stall_after_signatures", "stall_after_files", "state_literal_modules",
    "key_declarations", "host_list_parsers", "record_kind_functions", "ssh_launchers",
    "two_way_ties", "files_over_400", "textual_outside_ui", "unparsed",
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent,
                    help="the checkout to count (default: this one)")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="one JSON object")
    ap.add_argument("--where", action="store_true", help="each count's places too")
    args = ap.parse_args(argv)
    if not (args.tree / "gputui").is_dir():
        print(f"house_counts: {args.tree}: no gputui/ folder there", file=sys.stderr)
        return 2
    places = where(args.tree)
    if args.json:
        got = {k: len(v) for k, v in places.items()}
        print(json.dumps({**got, "where": places} if args.where else got))
        return 0
    for key, items in places.items():
        print(f"{key:24} {len(items)}")
        if args.where or key == "two_way_ties":
            for item in items:
                print(f"    {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
