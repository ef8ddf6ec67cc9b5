"""Who listens on a local TCP port: the socket's owner (uid) and the process holding it.

Why: NCCL RAS answers on localhost:28028, and whatever answers there becomes evidence. Any
local user can listen on that port first (as `nobody`, before the job starts) and answer
as RAS would, naming any rank and pid: round four of the hostile sweep had root's
`gputui check` blame the fake's pid in its headline. An answer is evidence only when the
listening socket belongs to the job: owned by the ranks' user, and held by one of its rank
processes. The kernel says both: `/proc/net/tcp{,6}` (this network namespace) gives each
listening socket's uid and inode, and `/proc/PID/fd` links the inode to its holder.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

_LISTEN = "0A"
MAX_ROWS = 200_000  # lines read of each table
MAX_PROCS = 65_536  # processes looked at for a holder not among the ranks
MAX_FDS = 65_536  # descriptors looked at in one process


@dataclass(frozen=True)
class Listener:
    """A listening socket on the port: its inode, the owning uid, the holding pid if known."""

    addr: str
    port: int
    inode: int
    uid: int
    pid: int | None = None


def _address(hexaddr: str, v6: bool) -> str:
    raw = bytes.fromhex(hexaddr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, words)


def listen_table(proc_net: str = "/proc/self/net", most: int = MAX_ROWS) -> Iterator[Listener]:
    """Every TCP socket in LISTEN state that `proc_net`/tcp{,6} lists (its network namespace:
    `/proc/PID/net` is that process's view), reading at most `most` lines of each table; a
    table that cannot be read, or a line the kernel would not write, is skipped."""
    for name, v6 in (("tcp", False), ("tcp6", True)):
        try:
            with open(f"{proc_net}/{name}", encoding="ascii", errors="replace") as f:
                for n, line in enumerate(f):
                    if n > most:
                        break
                    parts = line.split()
                    if n == 0 or len(parts) < 10 or parts[3] != _LISTEN:
                        continue
                    addr, _, hexport = parts[1].partition(":")
                    try:
                        port, inode, uid = int(hexport, 16), int(parts[9]), int(parts[7])
                        yield Listener(_address(addr, v6), port, inode, uid)
                    except ValueError:
                        continue
        except OSError:
            continue


def listening_on(port: int, proc_net: str = "/proc/self/net") -> list[Listener]:
    """Every socket in LISTEN state on `port` in this network namespace."""
    return [lst for lst in listen_table(proc_net) if lst.port == port]


def _reaches(listener: str, targets: set[str]) -> bool:
    """Whether a socket bound to `listener` is the one a connection to `targets` meets."""
    if listener in targets:
        return True
    try:
        ip = ipaddress.ip_address(listener)
    except ValueError:
        return False
    if ip.is_unspecified:  # 0.0.0.0 / :: take every address of the host
        return True
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped is not None and str(mapped) in targets


def _addresses(host: str) -> set[str]:
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return {host}
    return {str(i[4][0]) for i in infos} | {host}


def holder(inode: int, first: Iterable[int] = ()) -> int | None:
    """The pid holding socket `inode`: the pids in `first` are looked at first, then every
    process (only those whose descriptors this user may read)."""
    want = f"socket:[{inode}]"
    seen: set[int] = set()
    for pid in list(first)[:4096]:
        seen.add(pid)
        if _holds(pid, want):
            return pid
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    for name in names[:MAX_PROCS]:
        if name.isdigit() and int(name) not in seen and _holds(int(name), want):
            return int(name)
    return None


def _holds(pid: int, want: str) -> bool:
    try:
        with os.scandir(f"/proc/{pid}/fd") as it:
            for i, entry in enumerate(it):
                if i >= MAX_FDS:
                    return False
                try:
                    if os.readlink(entry.path) == want:
                        return True
                except OSError:
                    continue
    except OSError:
        return False
    return False


def listener_for(host: str, port: int, first: Iterable[int] = ()) -> Listener | None:
    """The socket a connection to host:port would meet here, with its holder; None when no
    socket on this host listens there (a remote address, another network namespace)."""
    targets = _addresses(host)
    found = [x for x in listening_on(port) if _reaches(x.addr, targets)]
    if not found:
        return None
    # A specific address beats the wildcard, as the kernel picks it.
    found.sort(key=lambda x: _reaches(x.addr, set()) and x.addr not in targets)
    best = found[0]
    return Listener(best.addr, port, best.inode, best.uid, holder(best.inode, first))
