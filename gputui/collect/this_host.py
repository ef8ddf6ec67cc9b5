"""Whether a host name or address is this machine.

One answer for every place that asks: a rendezvous whose MASTER_ADDR is this node (its store
is here, so the ranks missing from this node are missing from the job), a debug server that
is here (found through rank 0's child, never asked as a remote host), a host NCCL RAS blames
(never "another host" when it is this one). Jobs name their master in every form: loopback,
the hostname short or qualified, or an address of one of this node's interfaces
(`MASTER_ADDR=$(hostname -i)` is common in launch scripts).

No DNS: a lookup can block for seconds on a node whose resolver is down, and the question is
asked from the gathering threads of a tool that must never hang. A qualified name and a
short one match on their first label (`node-a` is `node-a.cluster.local`).
"""

from __future__ import annotations

import socket

import psutil

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "::1", "::"})
ANY_ADDRESS = "0.0.0.0"  # a store bound to every address is reached here as well
LOOPBACK_PREFIXES = ("127.", "::ffff:127.")


def _plain(host: str) -> str:
    """`[fe80::1%eth0]` -> `fe80::1`: brackets, a zone index, case and a trailing dot off."""
    h = host.strip().strip("[]").lower().rstrip(".")
    return h.split("%", 1)[0]


def _same_name(a: str, b: str) -> bool:
    if a == b:
        return True
    if "." in a and "." in b:
        return False  # two qualified names must match whole
    return a.split(".", 1)[0] == b.split(".", 1)[0]


def _addresses() -> set[str]:
    try:
        nics = psutil.net_if_addrs()
    except (OSError, psutil.Error):
        return set()
    return {_plain(a.address) for addrs in nics.values() for a in addrs if a.address}


def is_this_host(host: str | None) -> bool:
    """Whether `host` (a name or an address, as a job or a tool wrote it) is this machine.

    Args:
        host: a host name or an address; None when none was given.

    Returns:
        True when it names this machine (its names, its addresses, localhost); False for None.
    """
    if not host or not isinstance(host, str):
        return False
    h = _plain(host)
    if not h:
        return False
    if h in LOOPBACK_NAMES or h == ANY_ADDRESS or h.startswith(LOOPBACK_PREFIXES):
        return True
    try:
        me = _plain(socket.gethostname())
    except OSError:
        me = ""
    if me and not _is_address(h) and _same_name(h, me):
        return True
    return _is_address(h) and h in _addresses()


def _is_address(h: str) -> bool:
    """An IPv4 or IPv6 literal (a name never holds ':' and never is all digits and dots)."""
    return ":" in h or all(part.isdigit() for part in h.split(".") if part)
