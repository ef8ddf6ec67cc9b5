"""Slow clients (slowloris) against a real exporter, and scrapes timed while they hold on.

`SlowClients(port, n)` keeps `n` sockets open to the exporter, each trickling one byte of a
request head every `pace` seconds and reconnecting as soon as the server closes it, as an
attacker would. `scrape_while(url, seconds)` scrapes at a steady pace meanwhile and returns
each scrape's latency (None for a failure). Used by tests/test_hostile_exporter.py and
bench/exporter_slow_clients.py (which prints the figures).
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

TRICKLE = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4000


class SlowClients:
    def __init__(self, port: int, n: int, pace: float = 0.2) -> None:
        self.port, self.n, self.pace = port, n, pace
        self.socks: list[socket.socket | None] = [None] * n
        self.sent = [0] * n
        self.reconnects = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drive, name="slow-clients", daemon=True)

    def _connect(self, k: int) -> None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=2)
            s.setblocking(False)
        except OSError:
            s = None
        self.socks[k], self.sent[k] = s, 0

    def __enter__(self) -> SlowClients:
        for k in range(self.n):
            self._connect(k)
        self._thread.start()
        return self

    def _drive(self) -> None:
        while not self._stop.wait(self.pace):
            for k in range(self.n):
                s = self.socks[k]
                try:
                    if s is None:
                        raise OSError("not connected")
                    s.send(TRICKLE[self.sent[k] % len(TRICKLE) :][:1])
                    self.sent[k] += 1
                except BlockingIOError:
                    pass
                except OSError:  # closed by the server: come back, as an attacker does
                    if s is not None:
                        s.close()
                    self.reconnects += 1
                    self._connect(k)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for s in self.socks:
            if s is not None:
                s.close()


def scrape_once(url: str, timeout: float = 5.0) -> float | None:
    """Seconds one scrape took, or None when it failed or said nothing useful."""
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            body = r.read()
    except OSError:
        return None
    return time.monotonic() - t0 if b"gputui_build_info" in body else None


def scrape_while(url: str, seconds: float, every: float = 0.25) -> list[float | None]:
    """Scrapes at a steady pace for `seconds`; each one's latency (None: failed)."""
    out: list[float | None] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        out.append(scrape_once(url))
        time.sleep(max(0.0, every - (time.monotonic() - t0)))  # the scrape pace
    return out
