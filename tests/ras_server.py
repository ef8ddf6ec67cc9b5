"""A real TCP server on 127.0.0.1 that answers like NCCL's RAS thread, for the client tests.

It stands in for the one thing CI cannot run (NCCL with 2+ GPUs). Each connection gets the
next answer of its script: bytes to send after the query arrived, "silent" (accept, read,
never answer), or "close" (accept and hang up at once). It records what each client sent.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class RasServer:
    def __init__(self, script: list[bytes | str], port: int = 0) -> None:
        self.script = list(script)
        self.received: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", port))
        self.sock.settimeout(0.1)  # the accept loop looks at the stop flag this often
        self.port = self.sock.getsockname()[1]
        self.addr = f"127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            what = self.script[min(n, len(self.script) - 1)]
            n += 1
            threading.Thread(target=self._answer, args=(conn, what), daemon=True).start()

    def _answer(self, conn: socket.socket, what: bytes | str) -> None:
        if what == "close":
            conn.close()
            return
        got = b""
        conn.settimeout(5)
        try:
            while b"STATUS\n" not in got:  # [SET FORMAT json +] VERBOSE STATUS
                chunk = conn.recv(4096)
                if not chunk:
                    break
                got += chunk
        except OSError:
            pass
        self.received.append(got)
        if what == "silent":
            self._held.append(conn)  # keep it open, say nothing
            return
        try:
            conn.sendall(what)  # type: ignore[arg-type]
        except OSError:
            pass
        conn.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        for c in self._held:
            c.close()
        self._thread.join(timeout=5)


@contextmanager
def ras_server(*script: bytes | str, port: int = 0) -> Iterator[RasServer]:
    s = RasServer(list(script), port)
    try:
        yield s
    finally:
        s.close()


def free_ras_port() -> int:
    """A loopback port nothing listens on now (a server bound to port 0, then closed)."""
    with ras_server(b"") as srv:
        return srv.port


# Rank 0's own RAS thread, as far as gputui can tell: the rank process itself listens on the
# job's NCCL_RAS_ADDR (as NCCL's RAS thread does, inside the rank) and passes each query to the
# test's scripted server at BACKEND, and its answer back. An answer is evidence only from a
# listener that is one of the job's ranks (gputui/collect/nccl/listener.py): the test's own
# server, held by the pytest process, is not, and its 4-rank answers for a job of 2 are refused.
RANK_RELAY = r"""
import socket, threading
_srv = socket.create_server(("127.0.0.1", PORT))
def _relay(conn):
    try:
        with conn, socket.create_connection(("127.0.0.1", BACKEND), timeout=30) as up:
            got = b""
            while b"STATUS\n" not in got:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                got += chunk
            up.sendall(got)
            while True:
                chunk = up.recv(65536)
                if not chunk:
                    break
                conn.sendall(chunk)
    except OSError:
        pass
def _serve():
    while True:
        conn, _ = _srv.accept()
        threading.Thread(target=_relay, args=(conn,), daemon=True).start()
threading.Thread(target=_serve, daemon=True).start()
"""


def relayed_ranks(spawn, backend: int, n: int = 2, code: str = "", port: int = 0) -> list:
    """`n` rank processes (the `spawn` fixture's) whose environment names one RAS address
    (127.0.0.1:`port`, a free one by default), rank 0 listening there and relaying to the
    test's server on `backend`: the listener is the job's own rank, so what the server
    answers is evidence. `code` runs in every rank."""
    port = port or free_ras_port()
    env = {"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}
    relay = RANK_RELAY.replace("BACKEND", str(backend)).replace("PORT", str(port))
    return [spawn(env, code=code + (relay if i == 0 else "")) for i in range(n)]


def stand_in_nccl(directory: Path) -> Path:
    """A real (empty) shared object named like NCCL, built with gcc, for ranks to preload:
    gputui then finds NCCL loaded in them and asks RAS, as on a GPU node."""
    src = directory / "nccl.c"
    src.write_text("int gputui_test_nccl_stand_in(void) { return 0; }\n")
    lib = directory / "libnccl.so.2.28.9"
    r = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], capture_output=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return lib


def ras_json(pids: list[int], counts: list[dict[str, int]]) -> bytes:
    """NCCL's RAS JSON answer (as 2.28 writes it) for one communicator whose rank r is
    `pids[r]` on 127.0.0.1 and GPU r, healthy, with collective counts `counts[r]`."""
    status = {
        "init_state": 0,
        "async_error": 0,
        "finalize_called": False,
        "destroy_flag": False,
        "abort_flag": False,
    }
    ranks = [
        {
            "rank": r,
            "host": "127.0.0.1",
            "pid": pid,
            "cuda_dev": r,
            "nvml_dev": r,
            "status": status,
            "collective_counts": c,
        }
        for r, (pid, c) in enumerate(zip(pids, counts, strict=True))
    ]
    doc = {
        "nccl_version": "2.28.9",
        "cuda_runtime_version": 13000,
        "cuda_driver_version": 13000,
        "timestamp": "2026-11-28 21:00:00",
        "communicators_count": 1,
        "communicators": [
            {
                "hash": "0x5a5605dc3a5f6da2",
                "secondary_hash": "0x1:0x2",
                "size": len(ranks),
                "ranks_count": len(ranks),
                "missing_ranks_count": 0,
                "ranks": ranks,
            }
        ],
    }
    return ("OK\n" + json.dumps(doc, indent=1)).encode()
