"""Ask NCCL's RAS thread how every rank of a job is doing, from the node gputui runs on.

NCCL >= 2.24 runs a RAS thread in every process; the threads keep in touch across nodes and
answer plain-text queries on `localhost:28028` (`NCCL_RAS_ADDR` moves it). One query covers
the whole job, on every node. gputui sends `SET FORMAT json` and `VERBOSE STATUS` in one go:
NCCL >= 2.28.7 answers `OK` and JSON; an older NCCL answers `ERROR: Unknown command` to the
first line and text to the second, so one round trip serves both (ras_parse reads either).

Bounded everywhere: a connect timeout, a total deadline (a query over many nodes can take
seconds, so never on the UI thread), a cap on the answer's size, and a cancel event checked
between reads. Failures come back as an outcome, never as an exception.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from gputui.collect.nccl.listener import listener_for
from gputui.collect.nccl.ras_model import RasAnswer
from gputui.collect.nccl.ras_parse import parse_answer

DEFAULT_ADDR = "localhost:28028"
CONNECT_TIMEOUT_S = 2.0
TOTAL_TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 8 << 20  # a 4096-rank JSON answer is ~3 MB
QUERY = b"SET FORMAT json\nVERBOSE STATUS\n"
TEXT_QUERY = b"VERBOSE STATUS\n"  # the fallback when the JSON answer does not parse
_POLL_S = 0.2  # how often a waiting read looks at the cancel event


@dataclass(frozen=True)
class RasQuery:
    """One query: what came back, or why nothing usable did."""

    outcome: str  # done | refused | timeout | garbage | too_big | error | cancelled
    addr: str
    t: float  # Unix time the query started
    latency_s: float
    answer: RasAnswer | None = None
    error: str | None = None  # one line, for the person reading the verdict
    nbytes: int = 0
    listener: str | None = None  # whose socket answered: "pid 812 (rank), uid 1000" ...


@dataclass(frozen=True)
class JobSide:
    """What the job's own processes say, against which an answer is checked: the rank pids
    and their uids (who may own the listener), and the job's world size."""

    pids: Collection[int] = ()
    uids: Collection[int] = ()
    world: int | None = None
    notes: list[str] = field(default_factory=list)


def parse_addr(value: str | None) -> tuple[str, int]:
    """(host, port) to connect to, from an NCCL_RAS_ADDR value ("host:port", "[v6]:port").

    A wildcard bind address (0.0.0.0, ::) is reached through the loopback address.
    ValueError for a value NCCL would not accept either.
    """
    text = (value or DEFAULT_ADDR).strip()
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"NCCL_RAS_ADDR={text!r} is not host:port")
    if host in ("0.0.0.0", "*"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return host, int(port)


def query_ras(
    addr: str | None = None,
    *,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    total_timeout: float = TOTAL_TIMEOUT_S,
    max_bytes: int = MAX_ANSWER_BYTES,
    cancel: threading.Event | None = None,
    job: JobSide | None = None,
) -> RasQuery:
    """Query the RAS thread at `addr` (default localhost:28028). Never raises.

    With `job`, the answer is evidence only from a listener the job's user owns (outcome
    "untrusted" otherwise, and nothing is sent to it), and an answer from a listener that is
    not one of the job's ranks, or that names a larger world than the job's, is said to be
    unverified (gputui.collect.nccl.listener says why: any local user can listen there).

    Args:
        addr: `HOST:PORT` of the RAS listener; None: localhost:28028.
        connect_timeout: seconds to wait for the connection.
        total_timeout: seconds for the whole exchange.
        max_bytes: the most bytes of answer read.
        cancel: set to stop at once.
        job: the job the answer must come from (its user, its ranks, its world size); None: any
            listener.

    Returns:
        A RasQuery: its outcome (ok, refused, untrusted, timeout...) and the parsed answer when
        there is one.
    """
    shown = addr or DEFAULT_ADDR
    t0, start = time.time(), time.monotonic()

    def result(outcome: str, error: str | None = None, **kw: object) -> RasQuery:
        took = round(time.monotonic() - start, 4)
        return RasQuery(outcome, shown, t0, took, error=error, **kw)  # type: ignore[arg-type]

    try:
        host, port = parse_addr(addr)
    except ValueError as e:
        return result("error", str(e))
    vetted = vet_listener(host, port, job) if job is not None else (None, None)
    if vetted[0] is not None:
        return result("untrusted", vetted[0], listener=vetted[1])

    def exchange(query: bytes) -> bytes | RasQuery:
        """The whole answer to one query, or the failure as a result."""
        left = total_timeout - (time.monotonic() - start)
        try:
            sock = socket.create_connection(
                (host, port), timeout=max(0.05, min(connect_timeout, left))
            )
        except ConnectionRefusedError:
            return result("refused", f"nothing listens on {host}:{port}")
        except TimeoutError:
            return result("timeout", f"no connection to {host}:{port} within {connect_timeout:g} s")
        except OSError as e:
            return result("error", f"cannot connect to {host}:{port}: {e.strerror or e}")
        data = bytearray()
        with sock:
            try:
                sock.settimeout(max(0.05, total_timeout - (time.monotonic() - start)))
                sock.sendall(query)
                while True:
                    if cancel is not None and cancel.is_set():
                        return result("cancelled", "cancelled", nbytes=len(data))
                    left = total_timeout - (time.monotonic() - start)
                    if left <= 0:
                        what = "answered nothing" if not data else f"sent {len(data)} bytes, no end"
                        why = f"accepted the query but {what} within {total_timeout:g} s"
                        return result("timeout", f"{host}:{port} {why}", nbytes=len(data))
                    sock.settimeout(min(_POLL_S, left))
                    try:
                        chunk = sock.recv(65536)
                    except TimeoutError:
                        continue
                    if not chunk:
                        break
                    data += chunk
                    if len(data) > max_bytes:
                        return result(
                            "too_big",
                            f"the answer from {host}:{port} passed {max_bytes >> 20} MiB; cut off",
                            nbytes=len(data),
                        )
            except OSError as e:
                if not data:
                    return result("error", f"{host}:{port}: {e.strerror or e}")
                # a reset after the answer was sent still leaves a readable answer
        return bytes(data)

    got = exchange(QUERY)
    if isinstance(got, RasQuery):
        return got
    try:
        answer = parse_answer(got.decode("utf-8", errors="replace"))
    except ValueError as e:
        if "not valid JSON" not in str(e):
            return result("garbage", f"{host}:{port} answered, but {e}", nbytes=len(got))
        # Seen on NCCL 2.28.9 with a rank gone: its JSON writer left out a delimiter. The
        # text form of the same answer still reads; ask again for it in the time left.
        first = str(e)
        again = exchange(TEXT_QUERY)
        if isinstance(again, RasQuery):
            return result("garbage", f"{host}:{port} answered, but {first}", nbytes=len(got))
        try:
            answer = parse_answer(again.decode("utf-8", errors="replace"))
        except ValueError as e2:
            return result("garbage", f"{host}:{port} answered, but {first}; text: {e2}")
        note = (
            f"NCCL's JSON answer was malformed ({first.split('(')[-1].rstrip(')')}): read as text"
        )
        answer = replace(answer, notes=(*answer.notes, note))
        got = again
    if job is not None:
        doubt = questioned(answer, job)
        if doubt is not None and job.notes:  # unverified listener and a world that disagrees
            return result(
                "untrusted", f"{host}:{port}: {job.notes[0]}; {doubt}", listener=vetted[1]
            )
        if doubt is not None or job.notes:
            answer = replace(answer, notes=(*answer.notes, *job.notes, *([doubt] if doubt else [])))
    return result("done", answer=answer, nbytes=len(got), listener=vetted[1])


def vet_listener(host: str, port: int, job: JobSide) -> tuple[str | None, str | None]:
    """(why the listener is not evidence, or None; who it is). An unverified listener of
    the job's own user adds a line to `job.notes`."""
    who = listener_for(host, port, job.pids)
    if who is None:
        job.notes.append(f"nothing on this host listens on {host}:{port} as seen from here")
        return None, None
    shown = f"uid {who.uid}" + (f", pid {who.pid}" if who.pid is not None else "")
    if job.uids and who.uid not in job.uids:
        uids = ", ".join(str(u) for u in sorted(set(job.uids)))
        return (
            f"the listener on {host}:{port} ({shown}) is not the job's user (uid {uids}): its "
            "answer is not evidence (another user can listen on the RAS port first)",
            shown,
        )
    if who.pid is None:
        job.notes.append(f"the listener on {host}:{port} ({shown}) could not be tied to a rank")
    elif job.pids and who.pid not in job.pids:
        job.notes.append(
            f"the listener on {host}:{port} is pid {who.pid}, not one of the job's ranks"
        )
    return None, shown


def questioned(answer: RasAnswer, job: JobSide) -> str | None:
    """Why the answer's world does not fit the job's (a communicator larger than the job's
    world size), or None."""
    if not job.world:
        return None
    sizes = [c.size for c in answer.comms if c.size is not None]
    big = max(sizes, default=0)
    if big > job.world:
        return (
            f"NCCL RAS names a communicator of {big} ranks but the job's world size is "
            f"{job.world}: its ranks and pids are questioned"
        )
    return None
