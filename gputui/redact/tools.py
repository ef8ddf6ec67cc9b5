"""Secrets that only the tool's own syntax reveals: `redis-cli -a X`, `ldapsearch -w X`.

The word rules of names.py know `--password X` and `-p X` anywhere, but `-a`, `-w`, `-k`
or `-P` mean a password only to particular tools. So the tool is recognised, and by the
basename of an argument, not by the process name: a wrapper or `exec -a` can make the
process name `python` while argv still says `/usr/bin/redis-cli`, and a launcher
(`sudo`, `env`, `timeout`, `sh -c`) puts the tool further along the same argv. From the
first argument naming a known tool on, its options are read with its rules.

Each rule adds spans to what argv_spans finds; overlaps merge, so a value two rules take
is redacted once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from gputui.redact.formats import Span

# Options whose NEXT argument is the password, per tool (by the basename of argv words).
_MYSQL = ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck")
_MARIADB = ("mariadb", "mariadb-dump", "mariadb-admin")
_LDAP = ("ldapsearch", "ldapmodify", "ldapadd", "ldapdelete", "ldapwhoami", "ldappasswd")
NEXT_IS_SECRET: dict[str, frozenset[str]] = {
    "redis-cli": frozenset({"-a", "--pass"}),
    "valkey-cli": frozenset({"-a", "--pass"}),
    "keydb-cli": frozenset({"-a", "--pass"}),
    "openssl": frozenset({"-k", "-K", "-pass", "-passin", "-passout"}),
    "mosquitto_pub": frozenset({"-P", "--pw"}),
    "mosquitto_sub": frozenset({"-P", "--pw"}),
    "zip": frozenset({"-P", "--password"}),
    "unzip": frozenset({"-P"}),
    "rar": frozenset(),
    **{t: frozenset({"-w", "-y"}) for t in _LDAP},  # -y names a file: a path is shown below
    **{t: frozenset({"--password"}) for t in (*_MYSQL, *_MARIADB)},
}
# Options that carry the password glued to them (`-aSECRET`, `-pSECRET`).
GLUED_IS_SECRET: dict[str, tuple[str, ...]] = {
    **{t: ("-p",) for t in (*_MYSQL, *_MARIADB, "7z", "7za", "rar", "unrar")},
    "redis-cli": ("-a",),
    "ldapsearch": ("-w",),
}
# `user%password` (smbclient, rpcclient, net) after -U / --user.
PERCENT_USER: dict[str, frozenset[str]] = {
    t: frozenset({"-U", "--user"}) for t in ("smbclient", "rpcclient", "net", "smbget")
}
# htpasswd -b FILE USER PASSWORD (or -nb USER PASSWORD): the last argument.
BATCH_LAST = frozenset({"htpasswd"})

KNOWN = frozenset({*NEXT_IS_SECRET, *GLUED_IS_SECRET, *PERCENT_USER, *BATCH_LAST})


def tool_name(arg: str) -> str | None:
    """The known tool an argument names (`/usr/bin/redis-cli`, `redis-cli`), else None."""
    if not arg or arg.startswith("-") or len(arg) > 4096:
        return None
    base = os.path.basename(arg)
    return base if base in KNOWN else None


Programs = str | Iterable[str] | None
"""What the executable is called besides argv[0]: /proc/PID/comm, the basename of
/proc/PID/exe (one name or several; None when unknown)."""


def program_tool(program: Programs) -> str | None:
    """The known tool among the executable's names, else None."""
    names = (program,) if isinstance(program, str) else program or ()
    return next((t for t in map(tool_name, names) if t is not None), None)


def tool_spans(args: Sequence[str], program: Programs = None) -> list[list[Span]]:
    """For each argument, the spans its tool's own syntax marks as a secret. `program`: the
    executable's names (/proc/PID/comm, /proc/PID/exe), for `exec -a python redis-cli -a X`,
    whose argv does not name the tool at all."""
    out: list[list[Span]] = [[] for _ in args]
    tool = program_tool(program)
    start = 0
    for i, arg in enumerate(args):
        named = tool_name(arg)
        if named is not None:
            tool, start = named, i
            continue
        if tool is None:
            continue
        prev = args[i - 1] if i > start + 1 else None
        if prev is not None and prev in NEXT_IS_SECRET.get(tool, ()):
            if not (prev == "-y" and arg.startswith("/")):  # ldap -y /path/to/file
                out[i].append((0, len(arg)))
                continue
        if prev is not None and prev in PERCENT_USER.get(tool, ()) and "%" in arg:
            out[i].append((arg.index("%") + 1, len(arg)))
            continue
        for flag in GLUED_IS_SECRET.get(tool, ()):
            if arg.startswith(flag) and len(arg) > len(flag) and not arg.startswith("--"):
                out[i].append((len(flag), len(arg)))
    if tool in BATCH_LAST:
        flags = "".join(a[1:] for a in args[start + 1 :] if a.startswith("-") and a[1:2] != "-")
        if "b" in flags and len(args) > start + 2 and not args[-1].startswith("-"):
            out[-1].append((0, len(args[-1])))
    return out
