"""One HTTP GET under ONE deadline: status line, headers, chunk-size lines and body alike.

A socket timeout bounds one read, not an answer: a server that sends its status line, a
header or a chunk-size line a byte a second never lets a read time out, and http.client
reads those lines itself (`getresponse()`, the chunked reader), outside any loop of ours.
Round four of the hostile sweep had such a server keep `gputui check` alive for over 300 s
after its verdict (and the dashboard's process after `q`).

So the socket itself keeps the deadline: every `recv_into` waits at most what is left of
the answer's time (in short steps that look at the cancel event), and past the deadline it
raises TimeoutError, whichever of http.client's readers asked.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time

POLL_S = 0.2  # how often a waiting read looks at the cancel event


class DeadlineSocket(socket.socket):
    """A connected socket whose reads and sends all end by `deadline` (time.monotonic())."""

    deadline: float = 0.0
    limit_s: float = 0.0
    cancel: threading.Event | None = None

    @classmethod
    def connect_to(
        cls,
        host: str,
        port: int,
        limit_s: float,
        connect_s: float,
        cancel: threading.Event | None = None,
    ) -> DeadlineSocket:
        deadline = time.monotonic() + limit_s
        raw = socket.create_connection((host, port), timeout=max(0.05, min(connect_s, limit_s)))
        s = cls(raw.family, raw.type, raw.proto, fileno=raw.detach())
        s.deadline, s.limit_s, s.cancel = deadline, limit_s, cancel
        return s

    def _left(self) -> float:
        if self.cancel is not None and self.cancel.is_set():
            raise OSError("cancelled")
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"timed out: no full answer within {self.limit_s:g} s")
        return left

    def recv_into(self, buffer, nbytes: int = 0, flags: int = 0) -> int:  # type: ignore[no-untyped-def, override]
        while True:
            left = self._left()
            self.settimeout(min(POLL_S, left))
            try:
                return super().recv_into(buffer, nbytes, flags)
            except TimeoutError:
                continue  # look at the deadline and the cancel event again

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        buf = bytearray(bufsize)
        n = self.recv_into(buf, bufsize, flags)
        return bytes(buf[:n])

    def sendall(self, data, flags: int = 0) -> None:  # type: ignore[no-untyped-def, override]
        self.settimeout(self._left())  # sendall's timeout bounds the whole call
        super().sendall(data, flags)


def get(
    host: str,
    port: int,
    path: str,
    limit_s: float,
    max_bytes: int,
    *,
    connect_s: float,
    cancel: threading.Event | None = None,
) -> tuple[int, bytes]:
    """(status, body) of `GET path`, all of it within `limit_s` seconds, the body at most
    `max_bytes`. TimeoutError past the deadline; OSError for anything else that failed."""
    sock = DeadlineSocket.connect_to(host, port, limit_s, connect_s, cancel)
    conn = http.client.HTTPConnection(host, port)
    conn.sock = sock  # connected already: http.client uses it as it is
    try:
        conn.request("GET", path, headers={"User-Agent": "gputui", "Accept": "text/html"})
        resp = conn.getresponse()
        chunks, size = [], 0
        while size <= max_bytes:
            data = resp.read1(65536)
            if not data:
                break
            chunks.append(data)
            size += len(data)
        if size > max_bytes:
            raise OSError(f"the answer is larger than {max_bytes >> 20} MiB")
        return resp.status, b"".join(chunks)
    except (http.client.HTTPException, ValueError, AttributeError) as e:
        raise OSError(f"not an HTTP answer ({type(e).__name__})") from None
    finally:
        conn.close()
