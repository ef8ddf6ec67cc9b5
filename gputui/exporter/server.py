"""ADDR:PORT parsing and a bounded HTTP server for prometheus_client's WSGI app.

prometheus_client's own `start_http_server` starts a thread per connection and never times
a connection out, so a client that connects and sends nothing holds a thread for good, and
a burst of them holds as many. This server has a fixed pool of worker threads and a short
queue: a connection beyond it is closed at once, and each connection has a socket timeout.
The exposition itself (text format, OpenMetrics negotiation, gzip) is prometheus_client's.
"""

from __future__ import annotations

import errno
import queue
import socket
import socketserver
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from gputui.errors import GputuiError

WORKERS = 4  # concurrent scrapes served; Prometheus sends one at a time per target
QUEUE = 16  # accepted connections waiting for a worker; more are closed at once
CONN_TIMEOUT_S = 10.0  # a connection that sends nothing for this long is closed

DEFAULT_LISTEN = "127.0.0.1:9835"


def parse_listen(text: str) -> tuple[str, int]:
    """'ADDR:PORT' (IPv6 as '[::1]:9835') -> (addr, port). ValueError with the reason."""
    addr, sep, port_text = text.rpartition(":")
    if not sep or not addr:
        raise ValueError(f"expected ADDR:PORT, e.g. {DEFAULT_LISTEN}: {text!r}")
    if addr.startswith("[") and addr.endswith("]"):
        addr = addr[1:-1]
    elif ":" in addr:
        raise ValueError(f"write an IPv6 address in brackets, e.g. [::1]:9835: {text!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"not a port number: {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range 0-65535: {port}")
    if not addr:
        raise ValueError(f"expected ADDR:PORT, e.g. {DEFAULT_LISTEN}: {text!r}")
    return addr, port


class _Handler(WSGIRequestHandler):
    timeout = CONN_TIMEOUT_S  # StreamRequestHandler sets it on the socket (per server below)

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds would flood the log: log nothing."""


class BoundedWSGIServer(WSGIServer):
    """A WSGI server whose accepted connections are served by a fixed pool of threads."""

    def __init__(
        self,
        addr: tuple[str, int],
        family: int,
        workers: int = WORKERS,
        conn_timeout: float = CONN_TIMEOUT_S,
    ) -> None:
        self.address_family = family
        self._queue: queue.Queue[tuple[Any, Any] | None] = queue.Queue(QUEUE)
        self._workers: list[threading.Thread] = []  # a failed bind closes before they start
        handler = type("_TimedHandler", (_Handler,), {"timeout": conn_timeout})
        super().__init__(addr, handler)
        self._workers = [
            threading.Thread(target=self._work, name=f"gputui-http-{n}", daemon=True)
            for n in range(workers)
        ]
        for t in self._workers:
            t.start()

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the address's FQDN, a DNS query that can hang on
        # a node with a broken resolver; the name is never used here.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)
        self.setup_environ()

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            self._queue.put_nowait((request, client_address))
        except queue.Full:
            self.shutdown_request(request)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            request, client_address = item
            try:
                self.finish_request(request, client_address)
            except Exception:  # a client that went away mid-answer: nothing to tell anyone
                pass
            finally:
                self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        for _ in self._workers:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                break  # daemon threads: they end with the process


def _routes(metrics_app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """/metrics is the exposition; / says where it is; anything else is 404."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics_app(environ, start_response)
        if path == "/":
            body = b"gputui exporter: metrics at /metrics\n"
            start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: metrics are at /metrics\n"]

    return app


def serve_metrics(
    addr: str, port: int, registry: Any, conn_timeout: float = CONN_TIMEOUT_S
) -> BoundedWSGIServer:
    """Bind, and serve `registry` at /metrics in a daemon thread. GputuiError when the
    address cannot be used (in use, not an address of this host, no permission)."""
    from prometheus_client import make_wsgi_app

    where = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
    try:
        infos = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, sockaddr = infos[0]
        server = BoundedWSGIServer((sockaddr[0], port), family, conn_timeout=conn_timeout)
    except socket.gaierror as e:
        raise GputuiError(f"cannot listen on {where}: {e.strerror}") from None
    except OSError as e:
        why = {
            errno.EADDRINUSE: "address already in use (another exporter running?)",
            errno.EACCES: "permission denied (ports below 1024 need root)",
            errno.EADDRNOTAVAIL: "not an address of this host",
        }.get(e.errno or 0, e.strerror or str(e))
        raise GputuiError(f"cannot listen on {where}: {why}") from None
    server.set_app(_routes(make_wsgi_app(registry)))
    threading.Thread(target=server.serve_forever, name="gputui-http", daemon=True).start()
    return server


def bound_port(server: BoundedWSGIServer) -> int:
    """The port actually bound (the one the kernel chose when asked for port 0)."""
    return int(server.server_address[1])
