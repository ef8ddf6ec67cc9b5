"""A debug server that answers a byte at a time cannot keep gputui alive.

Round four of the hostile sweep: rank 0's child served the debug server's index page, then
trickled the stacks page's status line, one header, or a chunk-size line a byte a second.
Each read came back before its timeout, so only a per-read timeout was ever in force: the
verdict printed at 10 s and the process never ended. Here a real server on loopback does
the same to the client, which must give up at its one deadline (or at once when cancelled).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gputui.collect.nccl.debugserver import Fetch, confirm
from gputui.collect.nccl.debugserver_find import Candidate

TRICKLES = {
    "status line": (b"", b"HTTP/1.1 200 OK" + b" " * 10_000),
    "headers": (b"HTTP/1.1 200 OK\r\n", b"X-Slow: " + b"a" * 100 + b"\r\n" * 100),
    "chunk-size line": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"0" * 10_000,
    ),
}


@contextmanager
def trickling_server(head: bytes, trickle: bytes) -> Iterator[Candidate]:
    """Answers `/` at once; any other page: `head`, then `trickle` a byte every 50 ms."""
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        with conn:
            req = b""
            while b"\r\n\r\n" not in req:
                got = conn.recv(4096)
                if not got:
                    return
                req += got
            try:
                if req.startswith(b"GET / "):
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 45\r\n\r\n"
                        b"<title>Torch Distributed Debug Server</title>"
                    )
                    return
                conn.sendall(head)
                for b in trickle:
                    if stop.wait(0.05):
                        return
                    conn.sendall(bytes([b]))
            except OSError:
                return

    def serve() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield Candidate("127.0.0.1", srv.getsockname()[1], "test")
    finally:
        stop.set()
        srv.close()
        t.join(10)


def _fetch_in_thread(fetch: Fetch, c: Candidate, limit_s: float) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def work() -> None:
        t0 = time.monotonic()
        try:
            out["answer"] = fetch(c, "/stacks", limit_s, 1 << 20)
        except OSError as e:
            out["error"] = e
        out["took"] = time.monotonic() - t0

    th = threading.Thread(target=work, daemon=True)
    th.start()
    return th, out


@pytest.mark.parametrize("where", list(TRICKLES))
def test_a_trickled_answer_ends_at_the_one_deadline(where):
    head, trickle = TRICKLES[where]
    with trickling_server(head, trickle) as c:
        fetch = Fetch()
        assert confirm(c, fetch) == (True, None)  # the index page is the server's
        th, out = _fetch_in_thread(fetch, c, limit_s=1.5)
        th.join(60)  # the trickle alone would last 500 s
        assert not th.is_alive(), f"still reading the {where} after 60 s"
    assert isinstance(out.get("error"), TimeoutError), out
    assert "within 1.5 s" in str(out["error"])


def test_cancel_ends_a_trickled_answer_long_before_its_deadline():
    head, trickle = TRICKLES["headers"]
    with trickling_server(head, trickle) as c:
        cancel = threading.Event()
        th, out = _fetch_in_thread(Fetch(cancel), c, limit_s=600)
        cancel.set()
        th.join(60)
        assert not th.is_alive(), "a cancelled read went on"
    assert "cancelled" in str(out.get("error")), out
