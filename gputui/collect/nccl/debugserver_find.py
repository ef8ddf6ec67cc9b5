"""Where a job's debug server is: rank 0's listening sockets, its host and port, its dumps.

PyTorch's debug server (`torch.distributed.debug.start_debug_server(port=25999, ...)`)
puts its front end in a child process of rank 0 (a `multiprocessing.Process`), listening on
all addresses. Nothing in the ranks' environment names the port, so gputui looks where the
kernel knows: the TCP sockets in LISTEN state (`/proc/PID/net/tcp{,6}`, seen from the rank's
own network namespace) whose inodes a child of rank 0 holds and rank 0 itself does not (a
forked child inherits its parent's sockets: those are the rank's worker server, its store,
gloo's listener, none of which gputui may send HTTP to). Port 25999 comes first. A
candidate is confirmed by the front end's own index page before anything else is asked.

When rank 0 is on another node, its host is the ranks' MASTER_ADDR (the store the debug
server registers in lives there), on the default port; `--debug-server HOST:PORT` names
any other. Its periodic dumps go where the job said (`dump_dir=`): gputui looks for a
directory the ranks' environment or command line names (`--debug-dump-dir DIR` names it
outright).

Every read is bounded (fds and lines read per process, children looked at) and a process
that vanishes or refuses is skipped: this runs in the Watcher's gathering thread.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import psutil

from gputui.collect.nccl.listener import listen_table

DEFAULT_PORT = 25999  # start_debug_server's default
MAX_FDS = 4096  # fds looked at per process
MAX_LINES = 65536  # lines of /proc/PID/net/tcp read
MAX_CHILDREN = 64
_DUMP_ENV = re.compile(r"(DEBUG|DUMP).*DIR|DIR.*(DEBUG|DUMP)")
_DUMP_ARG = re.compile(r"^--?[\w-]*dump[_-]?dir(?:=(.*))?$")


@dataclass(frozen=True)
class Candidate:
    """A place a front end may listen, and how gputui came to it (said in the record)."""

    host: str
    port: int
    found_by: str  # "option", "socket of pid 812 (a child of rank 0)", "MASTER_ADDR"

    @property
    def addr(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_addr(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT` or `PORT` (this host) -> (host, port); ValueError if not.

    Args:
        text: `HOST:PORT`, `[v6]:PORT` or a bare `PORT`.

    Returns:
        (host, port); the host is this machine's loopback for a bare port.

    Raises:
        ValueError: anything else (one line).
    """
    t = text.strip()
    m = re.fullmatch(r"\[([0-9a-fA-F:.]+)\]:(\d{1,5})", t) or re.fullmatch(
        r"([A-Za-z0-9_.-]{1,253}):(\d{1,5})", t
    )
    if m is not None:
        host, port = m.group(1), int(m.group(2))
    elif t.isdigit() and len(t) <= 5:
        host, port = "127.0.0.1", int(t)
    else:
        raise ValueError(f"not HOST:PORT: {text[:60]!r}")
    if not 0 < port < 65536:
        raise ValueError(f"port out of range: {text[:60]!r}")
    return host, port


# ---------------------------------------------------------------- sockets


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets `pid` holds (empty when its fds cannot be read)."""
    out: set[int] = set()
    try:
        with os.scandir(f"/proc/{pid}/fd") as it:
            for i, entry in enumerate(it):
                if i >= MAX_FDS:
                    break
                try:
                    link = os.readlink(entry.path)
                except OSError:
                    continue
                if link.startswith("socket:[") and link.endswith("]"):
                    out.add(int(link[8:-1]))
    except OSError:
        pass
    return out


def listening(pid: int) -> dict[int, tuple[str, int]]:
    """inode -> (address, port) of every TCP socket in LISTEN state in `pid`'s network
    namespace (its own view, so a container's sockets are found too)."""
    return {lst.inode: (lst.addr, lst.port) for lst in listen_table(f"/proc/{pid}/net", MAX_LINES)}


def _connect_host(addr: str) -> str:
    """Where to connect for a socket bound to `addr` (the wildcard: this host's loopback)."""
    if addr in ("0.0.0.0", "::", "::ffff:0.0.0.0"):
        return "127.0.0.1" if addr == "0.0.0.0" else "::1"
    return addr.removeprefix("::ffff:")


def _same_netns(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net")
    except OSError:
        return True  # unknown: try anyway


def front_end_candidates(rank0_pid: int) -> list[Candidate]:
    """Sockets a child of rank 0 listens on that rank 0 does not hold: the front end's
    (port 25999 first). Empty when rank 0's children cannot be read."""
    try:
        rank0 = psutil.Process(rank0_pid)
        children = rank0.children(recursive=True)[:MAX_CHILDREN]
        uid = rank0.uids().real
    except psutil.Error:
        return []
    children = [c for c in children if _uid_of(c) == uid]  # another user's socket is no evidence
    if not children:
        return []
    own = socket_inodes(rank0_pid)
    table = listening(rank0_pid)
    out: list[Candidate] = []
    for child in children:
        for inode in sorted(socket_inodes(child.pid) - own):
            if inode not in table:
                continue
            addr, port = table[inode]
            where = f"socket of pid {child.pid} (a child of rank 0)"
            if not _same_netns(child.pid):
                where += ", in another network namespace"
            c = Candidate(_connect_host(addr), port, where)
            if c not in out:
                out.append(c)
    return sorted(out, key=lambda c: c.port != DEFAULT_PORT)


def _uid_of(p: psutil.Process) -> int | None:
    """The real and effective uid of a process, when they agree (a setuid child's do not)."""
    try:
        u = p.uids()
    except psutil.Error:
        return None
    return u.real if u.real == u.effective else None


def master_candidate(master: str | None) -> Candidate | None:
    """Rank 0's host from a rank's `MASTER_ADDR:MASTER_PORT`, on the default port."""
    if not master:
        return None
    host = master.rsplit(":", 1)[0].strip("[]")
    if not host or host == "?" or len(host) > 253:
        return None
    return Candidate(host, DEFAULT_PORT, "MASTER_ADDR (rank 0's host), the default port")


# ---------------------------------------------------------------- dump directories


def dump_dirs(envs: Iterable[Mapping[str, str]], cmdlines: Iterable[Sequence[str]]) -> list[str]:
    """Directories the ranks' environment or command line name for debug dumps, in the order
    found: a variable whose name says DEBUG/DUMP and DIR, an argument `--*dump-dir[=]DIR`."""
    out: list[str] = []

    def add(path: str | None) -> None:
        if path and len(path) < 4096 and path.startswith("/") and path not in out:
            out.append(path)

    for env in envs:
        for k, v in list(env.items())[:512]:
            if _DUMP_ENV.search(k.upper()):
                add(v.strip())
    for argv in cmdlines:
        args = list(argv)[:1024]
        for i, a in enumerate(args):
            m = _DUMP_ARG.match(a)
            if m is not None:
                add(
                    m.group(1)
                    if m.group(1) is not None
                    else (args[i + 1] if i + 1 < len(args) else None)
                )
    return out[:8]
