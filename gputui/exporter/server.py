"""ADDR:PORT parsing and an HTTP server for the metrics that a hostile client cannot starve.

Anyone who can reach the port can connect. The earlier server (a pool of 4 threads, a
queue of 16, a timeout per read) was starved by four sockets sending one byte a second:
every worker held, and `/metrics` unanswered for as long as they kept going, which blinds
a fleet's hang alerts. This one is an asyncio server in one daemon thread, so a waiting
connection costs a coroutine, not a thread, and:

- one deadline covers the whole exchange, from accept to the last byte of the answer
  (`conn_timeout`, default 10 s, the Prometheus scrape timeout): trickling a byte a second
  does not extend it;
- the request head is at most `MAX_HEAD` bytes (else 431);
- at most `MAX_WAITING` connections may be waiting for their request; one more evicts the
  OLDEST waiting one. Loopback clients all share one address, so a cap per address would
  lock the local Prometheus out with the attacker; evicting the oldest instead means a
  scraper, which sends its whole request as soon as it connects, always gets in, however
  many slow clients keep reconnecting. A connection whose whole request head has arrived,
  read or not, is not waiting (`_head_arrived`);
- `MAX_CONNECTIONS` in all, and the exposition is formatted on a pool of `RENDERERS`
  threads, so neither memory nor threads grow with the number of clients.

The exposition itself (text format, OpenMetrics negotiation, gzip) is prometheus_client's
WSGI app, called with a minimal environ. The server has no TLS and no authentication: for a
port that is not loopback, see docs/hostile.md (a reverse proxy, or exporter-toolkit style
web config in front).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import socket
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gputui.errors import GputuiError

CONN_TIMEOUT_S = 10.0  # whole exchange, accept to last byte (Prometheus' scrape timeout)
MAX_HEAD = 8192  # request line and headers; a scraper sends a few hundred bytes
MAX_WAITING = 64  # connections waiting for their request; one more evicts the oldest
MAX_CONNECTIONS = 512  # in all (each is a file descriptor); beyond, a new one is closed
RENDERERS = 2  # threads formatting the exposition; a scrape takes about a millisecond
START_TIMEOUT_S = 10.0

DEFAULT_LISTEN = "127.0.0.1:9835"

App = Callable[..., Iterable[bytes]]


def parse_listen(text: str) -> tuple[str, int]:
    """'ADDR:PORT' (IPv6 as '[::1]:9835') -> (addr, port). ValueError with the reason.

    Args:
        text: the `--listen` value.

    Returns:
        (addr, port).

    Raises:
        ValueError: not ADDR:PORT, or a port out of range (the reason).
    """
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


class _BadRequest(Exception):
    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    """Request head -> (method, path, query, headers lower-cased). _BadRequest if malformed."""
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
    except ValueError:
        raise _BadRequest("400 Bad Request") from None
    if not version.startswith("HTTP/1."):
        raise _BadRequest("505 HTTP Version Not Supported")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                raise _BadRequest("400 Bad Request")
            headers[name.strip().lower()] = value.strip()
    path, _, query = target.partition("?")
    return method, path, query, headers


def _call_app(app: App, method: str, path: str, query: str, headers: dict[str, str]) -> Any:
    """The WSGI app's (status, headers, body) for one request (run on a renderer thread)."""
    got: list[Any] = []

    def start_response(status: str, hdrs: list[tuple[str, str]], exc_info: Any = None) -> None:
        got[:] = [status, hdrs]

    environ = {
        "REQUEST_METHOD": "GET" if method == "HEAD" else method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "HTTP_ACCEPT": headers.get("accept", ""),
        "HTTP_ACCEPT_ENCODING": headers.get("accept-encoding", ""),
    }
    body = b"".join(app(environ, start_response))
    return got[0], got[1], body


_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def _head_arrived(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Whether a whole request head (up to its blank line) has arrived, read or not: the
    stream's buffer, then the socket's, peeked (MSG_PEEK leaves the bytes for the stream)."""
    buffered = bytes(getattr(reader, "_buffer", b""))  # StreamReader's, no public accessor
    if b"\r\n\r\n" in buffered:
        return True
    ts = writer.get_extra_info("socket")
    if ts is None:
        return False
    try:
        raw = socket.socket(fileno=ts.fileno())  # the transport's socket, borrowed
    except OSError:
        return False
    try:
        peeked = raw.recv(MAX_HEAD, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        peeked = b""
    finally:
        raw.detach()  # the transport owns the descriptor: never closed here
    return b"\r\n\r\n" in buffered[-3:] + peeked


def _answer(status: str, headers: list[tuple[str, str]], body: bytes, head_only: bool) -> bytes:
    lines = [f"HTTP/1.1 {status}"]
    lines += [f"{k}: {v}" for k, v in headers if k.lower() not in ("content-length", "connection")]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + (b"" if head_only else body)


class ScrapeServer:
    """The metrics app served on an already bound socket from an asyncio loop in a thread.

    `shutdown()` then `server_close()` stop it (the names of socketserver's, which the
    callers used before)."""

    def __init__(self, sock: socket.socket, app: App, conn_timeout: float) -> None:
        self._sock = sock
        self._app = app
        self.conn_timeout = conn_timeout
        self.server_address = sock.getsockname()
        self._waiting: collections.OrderedDict[asyncio.Task[None], _Conn] = (
            collections.OrderedDict()
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._render = ThreadPoolExecutor(RENDERERS, thread_name_prefix="gputui-http-render")
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self.evicted = 0  # waiting connections closed to make room (for tests and benches)
        self.refused = 0  # connections closed at once: MAX_CONNECTIONS reached
        self._thread = threading.Thread(target=self._run, name="gputui-http", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S) or self._failed is not None:
            self._render.shutdown(wait=False)
            raise GputuiError(f"the metrics server did not start: {self._failed}")

    # -- the loop thread ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # reported by __init__ if it happens before ready
            self._failed = e
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._on_connect, sock=self._sock, limit=MAX_HEAD)
        self._ready.set()
        await self._stopping.wait()
        server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._tasks) >= MAX_CONNECTIONS and not self._waiting:
            self.refused += 1
            writer.transport.abort()
            return
        self._tasks.add(task)
        self._waiting[task] = (reader, writer)
        while len(self._waiting) > MAX_WAITING or len(self._tasks) > MAX_CONNECTIONS:
            if not self._evict(whole=len(self._tasks) > MAX_CONNECTIONS):
                break
        try:
            await asyncio.wait_for(self._exchange(task, reader, writer), self.conn_timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError, OSError, ValueError):
            pass  # too slow, evicted, gone, or malformed past answering: just close
        except Exception:  # an app error must not end the loop; the client sees a close
            pass
        finally:
            self._waiting.pop(task, None)
            self._tasks.discard(task)
            writer.transport.abort()  # the answer (if any) was drained: nothing is lost

    def _evict(self, whole: bool) -> bool:
        """Close the oldest connection still waiting for its request. One whose whole request
        head has arrived (in the stream's buffer or the kernel's, not yet read by its task) is
        in, not waiting: a burst of reconnecting slow clients, all accepted in one turn of the
        loop, once closed a scraper whose request sat unread. Over MAX_CONNECTIONS (`whole`),
        the oldest goes regardless. False when nothing could be closed."""
        for task, (reader, writer) in self._waiting.items():
            if whole or not _head_arrived(reader, writer):
                del self._waiting[task]
                self.evicted += 1
                writer.transport.abort()
                task.cancel()
                return True
        return False

    async def _exchange(
        self, task: asyncio.Task[None], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                raise _BadRequest("431 Request Header Fields Too Large") from None
            except asyncio.IncompleteReadError:
                return  # closed before a whole request: nothing to answer
            self._waiting.pop(task, None)  # in: no longer evictable
            method, path, query, headers = _parse_head(head[:-4])
            if method not in ("GET", "HEAD"):
                raise _BadRequest("405 Method Not Allowed")
            loop = asyncio.get_running_loop()
            status, hdrs, body = await loop.run_in_executor(
                self._render, _call_app, self._app, method, path, query, headers
            )
        except _BadRequest as e:
            self._waiting.pop(task, None)
            status, hdrs, body = e.status, [("Content-Type", "text/plain")], b""
            method = "GET"
        writer.write(_answer(status, hdrs, body, method == "HEAD"))
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    # -- the caller's thread --------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop serving: every connection is closed; returns when the loop has ended."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopping.set)
            except RuntimeError:  # the loop ended meanwhile
                pass
        self._thread.join(START_TIMEOUT_S)
        self._render.shutdown(wait=False)

    def server_close(self) -> None:
        self._sock.close()

    def counts(self) -> tuple[int, int]:
        """(connections open, of which waiting for their request): a snapshot, for tests."""
        return len(self._tasks), len(self._waiting)


def _routes(metrics_app: App) -> App:
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


def _bind(addr: str, port: int) -> socket.socket:
    """A listening socket on addr:port; GputuiError with the reason when it cannot be."""
    where = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
    sock: socket.socket | None = None
    try:
        infos = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, sockaddr = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(1024)
        sock.setblocking(False)
        return sock
    except socket.gaierror as e:
        raise GputuiError(f"cannot listen on {where}: {e.strerror}") from None
    except OSError as e:
        if sock is not None:
            sock.close()
        why = {
            errno.EADDRINUSE: "address already in use (another exporter running?)",
            errno.EACCES: "permission denied (ports below 1024 need root)",
            errno.EADDRNOTAVAIL: "not an address of this host",
        }.get(e.errno or 0, e.strerror or str(e))
        raise GputuiError(f"cannot listen on {where}: {why}") from None


def serve_metrics(
    addr: str, port: int, registry: Any, conn_timeout: float = CONN_TIMEOUT_S
) -> ScrapeServer:
    """Bind, and serve `registry` at /metrics from a daemon thread. GputuiError when the
    address cannot be used (in use, not an address of this host, no permission)."""
    from prometheus_client import make_wsgi_app

    sock = _bind(addr, port)
    try:
        return ScrapeServer(sock, _routes(make_wsgi_app(registry)), conn_timeout)
    except BaseException:
        sock.close()
        raise


def bound_port(server: ScrapeServer) -> int:
    """The port actually bound (the one the kernel chose when asked for port 0)."""
    return int(server.server_address[1])
