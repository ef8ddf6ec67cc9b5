"""The Prometheus HTTP API, read with the standard library: query_range in chunks, fetched
by a bounded pool of threads, under one deadline for the whole exchange.

Why each piece:
- Prometheus refuses a range query of more than 11,000 points per series; a window is cut
  into chunks of at most CHUNK_POINTS steps, each starting one step after the last ended,
  so that no instant is asked twice.
- Queries go out in parallel (at most `workers` at a time, one keep-alive connection per
  worker): a cluster's window is a few dozen queries, and the server answers them at once.
- One deadline covers everything (connecting, waiting, reading, parsing): a server that
  stalls, or drips its answer, ends the command with one line instead of hanging it. The
  workers are daemon threads, so a call stuck in the socket never holds the exit.
- Whatever the server answers is untrusted: its size is capped, its JSON is checked for
  the shape of a matrix, and a value that is not a number is a gap.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import queue
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gputui.errors import GputuiError

CHUNK_POINTS = 10_000  # under Prometheus' 11,000 points per series per query
MAX_BODY = 512 * 1024 * 1024  # one answer; a chunk of a large cluster is a few MB
READ_PIECE = 1 << 20
WORKERS = 8
# What a request on a kept-alive connection meets when the server has closed it.
_CLOSED = (
    BrokenPipeError,
    ConnectionResetError,
    http.client.RemoteDisconnected,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)
SOCKET_GRACE_S = 2.0


class PromError(GputuiError):
    """The server is down, slow, refuses, or answers something that is not Prometheus'."""


@dataclass(frozen=True)
class Server:
    """Where to ask, and how to prove who asks. `shown` is the URL without credentials."""

    scheme: str
    host: str
    port: int
    path: str  # the base path, no trailing slash ("" or "/prometheus")
    shown: str
    headers: dict[str, str] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | None = None

    def connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=self.ssl_context
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


def open_server(url: str, token_file: str | None = None, ca_file: str | None = None) -> Server:
    """The server of `url` (http or https, optional user:password@ for basic auth), a bearer
    token read from `token_file`, a CA bundle `ca_file`. Bad input is a one-line error.

    Args:
        url: the server's base URL, http or https, with an optional `user:password@`.
        token_file: a file holding a bearer token; None: no token.
        ca_file: a CA bundle for https; None: the system's.

    Returns:
        A Server to query.

    Raises:
        GputuiError: a bad URL or an unreadable file (one line, exit 2).
    """
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GputuiError(f"--prometheus {_shown(url)!r}: not an http:// or https:// URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise GputuiError(f"--prometheus {_shown(url)!r}: bad port") from None
    headers = {"Accept": "application/json", "User-Agent": "gputui"}
    if parts.username is not None:
        pair = (
            f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        )
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    if token_file is not None:
        headers["Authorization"] = "Bearer " + _read_token(token_file)
    context = None
    if parts.scheme == "https":
        try:
            context = ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as e:
            raise GputuiError(f"--ca-file {ca_file}: {_why(e)}") from None
    elif ca_file is not None:
        raise GputuiError("--ca-file is for an https:// URL")
    host = parts.hostname
    netloc = f"[{host}]" if ":" in host else host
    shown = f"{parts.scheme}://{netloc}:{port}{parts.path.rstrip('/')}"
    return Server(parts.scheme, host, port, parts.path.rstrip("/"), shown, headers, context)


def _read_token(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read(65536).strip()
    except (OSError, UnicodeDecodeError) as e:
        raise GputuiError(f"--token-file {path}: {_why(e)}") from None
    if not token or any(c in token for c in "\r\n\0"):
        raise GputuiError(f"--token-file {path}: no token in it (one line expected)")
    return token


def _shown(url: str) -> str:
    """A URL as it may be printed: no user:password."""
    parts = urllib.parse.urlsplit(url.strip()[:200])
    if parts.password is not None or parts.username is not None:
        netloc = parts.netloc.rsplit("@", 1)[-1]
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return url.strip()[:200]


def _why(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


@dataclass
class Series:
    """One series of a range query: its labels, and its points in time order."""

    labels: dict[str, str]
    times: list[float]
    values: list[float]  # nan where the server said NaN or something not a number


def chunks(
    start: float, end: float, step: float, points: int = CHUNK_POINTS
) -> list[tuple[float, float]]:
    """[start, end] cut into ranges of at most `points` steps on one grid: each begins one
    step after the one before ends, so every instant is asked once."""
    out = []
    span = step * (points - 1)
    t = start
    while t <= end:
        stop = min(end, t + span)
        out.append((t, stop))
        t = stop + step
    return out


Task = tuple[str, float, float]  # (query, start, end)


def fetch_ranges(
    server: Server,
    queries: Sequence[str],
    start: float,
    end: float,
    step: float,
    deadline_s: float,
    workers: int = WORKERS,
) -> dict[str, list[Series]]:
    """Every query's series over [start, end] at `step`, the chunks of one series joined.
    Raises PromError (one line) when the server does not answer them all within
    `deadline_s` seconds, or answers anything but a matrix."""
    deadline = time.monotonic() + deadline_s
    tasks = [(q, a, b) for q in queries for a, b in chunks(start, end, step)]
    answers = run_tasks(server, tasks, step, deadline, deadline_s, workers)
    out: dict[str, list[Series]] = {}
    for q in queries:
        joined: dict[tuple[tuple[str, str], ...], Series] = {}
        for task in tasks:
            if task[0] != q:
                continue
            for s in answers[task]:
                key = tuple(sorted(s.labels.items()))
                have = joined.get(key)
                if have is None:
                    joined[key] = s
                else:
                    have.times.extend(s.times)
                    have.values.extend(s.values)
        out[q] = list(joined.values())
    return out


def run_tasks(
    server: Server,
    tasks: list[Task],
    step: float,
    deadline: float,
    deadline_s: float,
    workers: int,
) -> dict[Task, list[Series]]:
    """The tasks on at most `workers` daemon threads; the first failure, or the deadline,
    ends the exchange."""
    todo: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
    done: queue.SimpleQueue[tuple[Task, list[Series] | BaseException]] = queue.SimpleQueue()
    for t in tasks:
        todo.put(t)
    n = max(1, min(workers, len(tasks)))
    for _ in range(n):
        todo.put(None)
        threading.Thread(
            target=_worker,
            args=(server, todo, done, step, deadline),
            daemon=True,
            name="gputui-prom",
        ).start()
    answers: dict[Task, list[Series]] = {}
    while len(answers) < len(tasks):
        left = deadline - time.monotonic()
        try:
            task, got = done.get(timeout=max(0.0, left))
        except queue.Empty:
            raise PromError(
                f"Prometheus at {server.shown} did not answer within {deadline_s:g} s "
                f"({len(answers)} of {len(tasks)} queries answered)"
            ) from None
        if isinstance(got, BaseException):
            raise got if isinstance(got, PromError) else PromError(_why(got))
        answers[task] = got
    return answers


def _worker(
    server: Server,
    todo: queue.SimpleQueue[Task | None],
    done: queue.SimpleQueue[tuple[Task, list[Series] | BaseException]],
    step: float,
    deadline: float,
) -> None:
    conn: http.client.HTTPConnection | None = None
    used = False  # the connection has answered before: the server may have closed it since
    try:
        while (task := todo.get()) is not None:
            try:
                if conn is None:
                    conn, used = server.connect(_socket_timeout(deadline)), False
                try:
                    body = _post(server, conn, task, step, deadline)
                except _CLOSED:
                    if not used:
                        raise
                    # A kept-alive connection the server closed while idle (its keep-alive
                    # timeout, a proxy's): asked again once on a new one, as browsers do.
                    conn.close()
                    conn = server.connect(_socket_timeout(deadline))
                    body = _post(server, conn, task, step, deadline)
                used = True
                done.put((task, parse_matrix(body, server.shown)))
            except BaseException as e:  # handed to the caller, which says it in one line
                if conn is not None:
                    conn.close()
                conn = None
                done.put((task, _as_error(e, server)))
                return  # the caller stops at the first failure
    finally:
        if conn is not None:
            conn.close()


def _socket_timeout(deadline: float) -> float:
    """A socket's timeout: past the deadline by a grace, so that the caller's deadline,
    which names it, always fires first; the daemon worker ends a moment later."""
    return max(0.1, deadline - time.monotonic()) + SOCKET_GRACE_S


def _as_error(e: BaseException, server: Server) -> BaseException:
    if isinstance(e, PromError):
        return e
    if isinstance(e, (TimeoutError, ConnectionError, OSError, http.client.HTTPException)):
        return PromError(f"Prometheus at {server.shown}: {_why(e)}")
    return e


def _post(
    server: Server, conn: http.client.HTTPConnection, task: Task, step: float, deadline: float
) -> bytes:
    """One query_range, POSTed (a long selector does not fit every proxy's URL limit)."""
    query, start, end = task
    form = urllib.parse.urlencode(
        {"query": query, "start": _num(start), "end": _num(end), "step": _num(step)}
    ).encode()
    headers = {**server.headers, "Content-Type": "application/x-www-form-urlencoded"}
    conn.timeout = _socket_timeout(deadline)
    if conn.sock is not None:
        conn.sock.settimeout(conn.timeout)
    conn.request("POST", f"{server.path}/api/v1/query_range", body=form, headers=headers)
    resp = conn.getresponse()
    data = _read(resp, deadline, server)
    if resp.status != 200:
        said = _error_text(data)
        raise PromError(
            f"Prometheus at {server.shown} answered HTTP {resp.status} {resp.reason}"
            + (f": {said}" if said else "")
        )
    return data


def _read(resp: http.client.HTTPResponse, deadline: float, server: Server) -> bytes:
    """The body, in pieces, with the deadline checked between them (a server that drips
    its answer a byte at a time is as slow as one that says nothing)."""
    parts: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise PromError(
                f"Prometheus at {server.shown}: too slow (deadline passed while reading)"
            )
        if resp.length == 0:  # a sized body read whole: read() marks it done (keep-alive)
            resp.read()
            return b"".join(parts)
        piece = resp.read1(READ_PIECE)
        if not piece:
            return b"".join(parts)
        size += len(piece)
        if size > MAX_BODY:
            raise PromError(f"Prometheus at {server.shown}: an answer over {MAX_BODY >> 20} MiB")
        parts.append(piece)


def _error_text(data: bytes) -> str:
    try:
        obj = json.loads(data)
    except ValueError:
        return ""
    if isinstance(obj, dict) and isinstance(obj.get("error"), str):
        return str(obj["error"])[:300]
    return ""


def _num(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")


def parse_matrix(data: bytes, shown: str) -> list[Series]:
    """A query_range answer's series; PromError for anything not shaped like one."""
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise PromError(f"{shown} did not answer JSON: is it a Prometheus server?") from None
    if not isinstance(obj, dict) or "status" not in obj:
        raise PromError(f"{shown} answered JSON that is not Prometheus' API")
    if obj["status"] != "success":
        said = obj.get("error") if isinstance(obj.get("error"), str) else "no reason given"
        raise PromError(f"Prometheus at {shown} said: {str(said)[:300]}")
    data_ = obj.get("data")
    if not isinstance(data_, dict) or data_.get("resultType") != "matrix":
        raise PromError(f"Prometheus at {shown}: the answer is not a matrix")
    result = data_.get("result")
    if not isinstance(result, list):
        raise PromError(f"Prometheus at {shown}: the answer has no result list")
    return [_series(r, shown) for r in result]


def _series(r: object, shown: str) -> Series:
    bad = PromError(f"Prometheus at {shown}: a series not shaped as one")
    if not isinstance(r, dict):
        raise bad
    labels, values = r.get("metric"), r.get("values")
    if not isinstance(labels, dict) or not isinstance(values, list):
        raise bad
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise bad
    try:  # two passes in C-speed comprehensions: a window is a million points
        times = [float(p[0]) for p in values]
        vals = [float(p[1]) for p in values]
    except (TypeError, ValueError, IndexError, KeyError):
        raise bad from None
    if math.inf in vals or -math.inf in vals:  # NaN is already nan: a gap
        vals = [x if math.isfinite(x) else math.nan for x in vals]
    return Series(labels, times, vals)


Fetcher = Callable[[Sequence[str]], dict[str, list[Series]]]
