"""Host lists as clusters write them: `node[01-64]`, `gpu-[1-3,7]-ib`, `a,b,c`, `@file`.

The bracket form is Slurm's (and pdsh's): ranges keep their zero padding (`[01-03]` gives
01, 02, 03), several brackets in one name multiply, and commas inside brackets are not list
separators. `@file` reads names or expressions from a file, one or more per line, `#`
starting a comment.

Bounded and linear, whatever the input (issue 34: the line `n[1-99999]` 1,000 times, an
11 KB file, took 58 s, each line expanding its 99,999 names again):

- an expression that was already expanded is not expanded again;
- every name an expansion makes counts, duplicates included: past MAX_GENERATED the list is
  refused with one line, so the work is at most MAX_GENERATED names;
- the result holds at most MAX_HOSTS distinct hosts;
- a name is a host name (DNS labels, an IPv4 or IPv6 address, `user@` in front) or the list
  is refused.

An `@file` whose content is not a host list (`@/etc/shadow`, under sudo) is refused with one
line that names the file, the line and what is wrong, and never quotes the file: its
content may be a secret. A list typed on the command line is the user's own and is quoted.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from gputui.collect.capped import read_capped
from gputui.errors import GputuiError

MAX_HOSTS = 100_000
"""Distinct hosts in one list: more nodes than any job has (the largest are ~30,000)."""
MAX_GENERATED = 10 * MAX_HOSTS
"""Names one list may make, duplicates counted: bounds the work of a list that repeats
itself with different but overlapping ranges (`n[1-99999]`, `n[2-99999]`, ...)."""
MAX_HOSTFILE_BYTES = 16 << 20  # 100,000 names of up to ~160 characters
MAX_NAME = 253 + 1 + 64  # a DNS name, `@`, a user name
_SUFFIXES = (".gz", ".jsonl", ".json", ".ndjson", ".csv", ".txt")
_CHARS = re.compile(r"[A-Za-z0-9._:@\-\[\],]+")
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_DNS = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9_.])?")
_USER = re.compile(r"[A-Za-z0-9._-]{1,64}")


class HostListError(ValueError):
    """A bad host list: `str()` quotes what was typed; `bare` says the same without quoting
    anything (for the content of a file)."""

    def __init__(self, bare: str, quoted: str | None = None) -> None:
        super().__init__(quoted or bare)
        self.bare = bare


def is_host_name(name: str) -> bool:
    """A DNS name or an IP address, with an optional `user@` in front; never an option."""
    user, sep, host = name.rpartition("@")
    if sep and not _USER.fullmatch(user):
        return False
    if not host or len(name) > MAX_NAME or host.startswith("-"):
        return False
    if ":" in host:
        import ipaddress  # here: `check` imports this module for host_from_name alone

        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True
    return _DNS.fullmatch(host) is not None


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets (linear: one pass per comma-free run)."""
    if "[" not in text and "]" not in text:
        return [p.strip() for p in text.split(",") if p.strip()]
    parts: list[str] = []
    start = depth = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostListError("unbalanced ']'", f"unbalanced ']' in {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostListError("unbalanced '['", f"unbalanced '[' in {text!r}")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _range(spec: str, whole: str) -> list[str]:
    out: list[str] = []
    for part in spec.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()) or len(lo) > 9 or len(hi) > 9:
            raise HostListError("a bad range", f"bad range [{spec}] in {whole!r}")
        if not sep:
            out.append(lo)
            continue
        a, b = int(lo), int(hi)
        if b < a:
            raise HostListError("a bad range", f"bad range [{spec}] in {whole!r}: {hi} < {lo}")
        if b - a >= MAX_HOSTS:
            raise HostListError("a range too large", f"range [{spec}] in {whole!r} is too large")
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        out += [str(n).zfill(width) for n in range(a, b + 1)]
        if len(out) > MAX_HOSTS:
            raise HostListError("a range too large", f"[{spec}] in {whole!r} is too large")
    return out


class _Budget:
    """Names still allowed to be made (MAX_GENERATED in all)."""

    def __init__(self) -> None:
        self.left = MAX_GENERATED

    def spend(self, n: int, whole: str) -> None:
        self.left -= n
        if self.left < 0:
            raise HostListError(
                f"more than {MAX_GENERATED} names to expand (duplicates counted)",
                f"{whole!r}: more than {MAX_GENERATED} names to expand (duplicates counted)",
            )


def _expand_one(name: str, budget: _Budget) -> list[str]:
    """One expression's names: every bracket's range, multiplied, in order."""
    parts = _BRACKET.split(name)  # literal, spec, literal, spec, ..., literal
    literals, specs = parts[0::2], parts[1::2]
    if any("[" in lit or "]" in lit for lit in literals):
        raise HostListError("unbalanced brackets", f"unbalanced brackets in {name!r}")
    if not specs:
        budget.spend(1, name)
        return [name]
    ranges = [_range(s, name) for s in specs]
    total = 1
    for r in ranges:
        total *= len(r)
        if total > MAX_HOSTS:
            raise HostListError(
                f"an expression of more than {MAX_HOSTS} hosts",
                f"{name!r} names more than {MAX_HOSTS} hosts",
            )
    budget.spend(total, name)
    template = "{}".join(lit.replace("{", "{{").replace("}", "}}") for lit in literals)
    return [template.format(*combo) for combo in itertools.product(*ranges)]


class _Hosts:
    """Distinct hosts in order, expressions expanded once each, within the budget."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.seen: set[str] = set()
        self.done: set[str] = set()  # expressions already expanded
        self.budget = _Budget()

    def add(self, item: str) -> None:
        if item in self.done:
            return
        self.done.add(item)
        if not _CHARS.fullmatch(item):
            raise HostListError("not a host name", f"not a host name or list: {item!r}")
        for h in _expand_one(item, self.budget):
            if h in self.seen:
                continue
            if not is_host_name(h):
                raise HostListError("not a host name", f"not a host name: {h!r}")
            self.seen.add(h)
            self.hosts.append(h)
        if len(self.hosts) > MAX_HOSTS:
            raise HostListError(f"more than {MAX_HOSTS} hosts")


def _from_file(path: str, into: _Hosts) -> None:
    """The names of an @file, line by line. An error names the file and the line, never
    their content."""
    shown = path if path.isprintable() else ascii(path)
    raw = read_capped(path, MAX_HOSTFILE_BYTES)  # @/dev/zero: one line, not GBs
    content = raw.decode("utf-8", errors="replace")
    for n, line in enumerate(content.splitlines(), 1):
        try:
            for word in line.split("#", 1)[0].split():
                for item in _split_top(word):
                    if item.startswith("@"):
                        raise HostListError("not a host name (a host file names no other)")
                    into.add(item)
        except HostListError as e:
            what = f"is {e.bare}" if e.bare.startswith("not ") else f"has {e.bare}"
            raise ValueError(f"{shown}: not a host list: line {n} {what}") from None


def expand_hosts(text: str) -> list[str]:
    """Host names, in order, without duplicates. ValueError (one line) on a bad expression.

    Args:
        text: a host expression: names, Slurm ranges (`node[01-04,07]`), commas, a file
            (`@hosts.txt`).

    Returns:
        The host names, in order, each once.

    Raises:
        ValueError: a bad expression (one line, for the command to print).
    """
    into = _Hosts()
    for item in _split_top(text.strip()):
        if item.startswith("@"):
            _from_file(item[1:], into)
        else:
            into.add(item)
    return into.hosts


def hosts_option(text: str, said: str, *, whole: bool = False) -> list[str]:
    """The hosts a command-line option names (`fleet HOSTS`, `probe --hosts`, `--probe-hosts`).

    Args:
        text: the option's value: names, bracket ranges, `@file`s, comma-separated.
        said: the option as the user typed it, first in every error (`fleet`, `--probe-hosts`).
        whole: a refused list is quoted whole (`not a host list: 'a,-x@b'`) instead of by
            what is wrong in it (`no hosts given`, `not a host name: '-x@b'`).

    Returns:
        The host names in order, without duplicates; never empty, and none starting with `-`
        (a launcher would read it as an option: `-oProxyCommand=...@host`).

    Raises:
        GputuiError: one line starting with `said` (exit 2) for a bad, empty or unsafe list.
    """
    try:
        hosts = expand_hosts(text)
    except ValueError as e:
        raise GputuiError(f"{said}: {e}") from None
    bad = next((h for h in hosts if h.startswith("-")), None)
    if whole and (not hosts or bad is not None):
        raise GputuiError(f"{said}: not a host list: {text!r}")
    if not hosts:
        raise GputuiError(f"{said}: no hosts given")
    if bad is not None:
        raise GputuiError(f"{said}: not a host name: {bad!r}")
    return hosts


def host_from_name(path: str) -> str:
    """'node-17.jsonl.gz' -> 'node-17': a replay's host when the recording names none.

    Args:
        path: a recording's path or file name.

    Returns:
        The file name without its directory and its recording suffixes.
    """
    name = Path(path).name
    for suffix in _SUFFIXES:
        name = name.removesuffix(suffix)
    return name or path
