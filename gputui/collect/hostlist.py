"""Host lists as clusters write them: `node[01-64]`, `gpu-[1-3,7]-ib`, `a,b,c`, `@file`.

The bracket form is Slurm's (and pdsh's): ranges keep their zero padding (`[01-03]` gives
01, 02, 03), several brackets in one name multiply, and commas inside brackets are not list
separators. `@file` reads names or expressions from a file, one or more per line, `#`
starting a comment. Expansion is bounded so a typo cannot ask for a billion hosts.
"""

from __future__ import annotations

import re
from pathlib import Path

from gputui.collect.capped import read_capped

MAX_HOSTS = 100_000
MAX_HOSTFILE_BYTES = 16 << 20  # 100,000 names of up to ~160 characters
_SUFFIXES = (".gz", ".jsonl", ".json", ".ndjson", ".txt")
_NAME = re.compile(r"^[A-Za-z0-9._:@\-\[\],]+$")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError(f"unbalanced '[' in {text!r}")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _range(spec: str, whole: str) -> list[str]:
    out = []
    for part in spec.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad range [{spec}] in {whole!r}")
        if not sep:
            out.append(lo)
            continue
        a, b = int(lo), int(hi)
        if b < a:
            raise ValueError(f"bad range [{spec}] in {whole!r}: {hi} < {lo}")
        if b - a >= MAX_HOSTS:
            raise ValueError(f"range [{spec}] in {whole!r} is too large")
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        out += [str(n).zfill(width) for n in range(a, b + 1)]
    return out


def _expand_one(name: str) -> list[str]:
    m = re.search(r"\[([^\[\]]*)\]", name)
    if m is None:
        if "]" in name or "[" in name:
            raise ValueError(f"unbalanced brackets in {name!r}")
        return [name]
    head, tail = name[: m.start()], name[m.end() :]
    out = []
    for mid in _range(m.group(1), name):
        out += _expand_one(head + mid + tail)
        if len(out) > MAX_HOSTS:
            raise ValueError(f"{name!r} names more than {MAX_HOSTS} hosts")
    return out


def expand_hosts(text: str, *, _depth: int = 0) -> list[str]:
    """Host names, in order, without duplicates. ValueError (one line) on a bad expression."""
    hosts: list[str] = []
    seen: set[str] = set()
    for item in _split_top(text.strip()):
        if item.startswith("@"):
            if _depth:
                raise ValueError(f"{item}: a host file cannot name another host file")
            raw = read_capped(item[1:], MAX_HOSTFILE_BYTES)  # @/dev/zero: one line, not GBs
            content = raw.decode("utf-8", errors="replace")
            words = [w for ln in content.splitlines() for w in ln.split("#", 1)[0].split()]
            names = expand_hosts(",".join(words), _depth=1) if words else []
        else:
            if not _NAME.match(item):
                raise ValueError(f"not a host name or list: {item!r}")
            names = _expand_one(item)
        for h in names:
            if h not in seen:
                seen.add(h)
                hosts.append(h)
        if len(hosts) > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} hosts")
    return hosts


def host_from_name(path: str) -> str:
    """'node-17.jsonl.gz' -> 'node-17': a replay's host when the recording names none."""
    name = Path(path).name
    for suffix in _SUFFIXES:
        name = name.removesuffix(suffix)
    return name or path
