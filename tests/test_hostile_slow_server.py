"""A debug server that answers a byte at a time cannot keep gputui alive.

Round four of the hostile sweep: rank 0's child served the debug server's index page, then
trickled the stacks page's status line, one header, or a chunk-size line a byte a second.
Each read came back before its timeout, so only a per-read timeout was ever in force: the
verdict printed at 10 s and the process never ended. Here a real server on loopback does
the same to the client, which must give up at its one deadline (or at once when cancelled).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gputui.collect.nccl.debugserver_ask import Fetch, confirm
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
    srv.settimeout(0.1)  # here, not in the thread: a short test may close it first
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
        t.join(10)  # its accept wakes within 0.1 s; then the socket is closed under no one
        srv.close()


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


# Rank 0's child: serves the debug server's index page, then trickles the stacks page's
# headers a byte every 50 ms, for about ten minutes.
SERVER = r"""
import os, socket, threading, time
srv = socket.create_server(("127.0.0.1", 0))
print(srv.getsockname()[1], flush=True)
def answer(conn):
    req = b""
    while b"\r\n\r\n" not in req:
        req += conn.recv(4096)
    if req.startswith(b"GET / "):
        body = b"<title>Torch Distributed Debug Server</title>"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        conn.close()
        return
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    if os.environ.get("TRICKLE_MARK"):
        open(os.environ["TRICKLE_MARK"], "w").close()
    try:
        for _ in range(12000):
            conn.sendall(b"X")
            time.sleep(0.05)
    except OSError:
        pass  # gputui gave up: what the tests wait for
while True:
    c, _ = srv.accept()
    threading.Thread(target=answer, args=(c,), daemon=True).start()
"""
RANK0 = (
    "import subprocess, sys\n"
    f"_server = subprocess.Popen([sys.executable, '-c', {SERVER!r}], stdout=subprocess.PIPE)\n"
    "_server.stdout.readline()\n"
)


def test_check_ends_on_time_though_the_jobs_debug_server_trickles(spawn):
    """`gputui check --duration 6` on a stalled job (the stand-in NVML spins its GPUs)
    whose debug server trickles: the process ends by itself, within its duration and the
    one deadline of a request, not when the server stops (ten minutes). Before, it never
    ended: the gatherer's read went on and the interpreter waited for its thread at exit."""
    import psutil
    from conftest import REPO
    from nvml_standin.build import build_standin, standin_env

    job = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29531", "WORLD_SIZE": "2"}
    ranks = [spawn({**job, "RANK": "0"}, code=RANK0), spawn({**job, "RANK": "1"})]
    server = psutil.Process(ranks[0].pid).children()
    env = standin_env(build_standin(), "spin")
    env["GPUTUI_STANDIN_PIDS"] = ",".join(str(r.pid) for r in ranks)
    argv = [sys.executable, "-m", "gputui", "check", "--json", "--stall-after", "1"]
    argv += ["--duration", "6", "--interval", "0.25"]
    try:
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    finally:
        for child in server:
            child.kill()
    assert r.returncode == 1, r.stderr  # the stall, said; and then the process ended
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    got = [x["debugserver"] for x in lines if "debugserver" in x]
    assert not got or got[-1]["outcome"] != "done", got  # never an answer from the trickle


def test_record_ends_on_the_first_sigterm_while_a_trickle_is_read(spawn, tmp_path):
    """`gputui record` gets SIGTERM while its gatherer reads the trickle: it ends then,
    keeping its file, and needs no second signal."""
    import signal
    import time

    import psutil
    from conftest import REPO
    from nvml_standin.build import build_standin, standin_env

    mark = tmp_path / "trickling"
    job = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29532", "WORLD_SIZE": "2"}
    job["TRICKLE_MARK"] = str(mark)
    ranks = [spawn({**job, "RANK": "0"}, code=RANK0), spawn({**job, "RANK": "1"})]
    server = psutil.Process(ranks[0].pid).children()
    env = standin_env(build_standin(), "spin")
    env["GPUTUI_STANDIN_PIDS"] = ",".join(str(r.pid) for r in ranks)
    out = tmp_path / "rec.jsonl.gz"
    argv = [sys.executable, "-m", "gputui", "record", str(out), "--stall-after", "1"]
    p = subprocess.Popen(
        argv + ["--interval", "0.25"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # polling for the gatherer's request (a condition), bounded
        assert mark.exists(), p.communicate(timeout=30)
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)  # before: the first SIGTERM was not enough
    finally:
        p.kill()
        for child in server:
            child.kill()
    err = p.stderr.read().decode() if p.stderr else ""
    # the job it recorded spins past --stall-after (the gatherer reads because of it): record
    # exits with that hang's code, 1, never 0, and the first SIGTERM was enough
    assert rc == 1, err
    assert "wrote " in err and out.exists()


def test_the_dashboard_process_ends_after_q_while_a_trickle_is_read(spawn, tmp_path):
    """The dashboard on a real pseudo-terminal watches the same stalled job; `q` while its
    gatherer reads the trickle ends the process, not only the screen."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import termios
    import time

    import psutil
    from nvml_standin.build import build_standin, standin_env

    mark = tmp_path / "trickling"
    job = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533", "WORLD_SIZE": "2"}
    job["TRICKLE_MARK"] = str(mark)
    ranks = [spawn({**job, "RANK": "0"}, code=RANK0), spawn({**job, "RANK": "1"})]
    server = psutil.Process(ranks[0].pid).children()
    env = standin_env(build_standin(), "spin")
    env["GPUTUI_STANDIN_PIDS"] = ",".join(str(r.pid) for r in ranks)
    env["TERM"] = "xterm-256color"
    argv = [sys.executable, "-m", "gputui", "--stall-after", "1", "--interval", "0.25"]
    pid, fd = pty.fork()
    if pid == 0:  # the child: the dashboard on the pty
        os.execvpe(sys.executable, argv, env)

    def drain_until(cond, seconds: float) -> bool:
        """Read the terminal (the app blocks if nobody does) until `cond()` or the time."""
        deadline = time.monotonic() + seconds
        closed = False
        while not cond() and time.monotonic() < deadline:
            if closed:
                time.sleep(0.05)  # the terminal is gone; polling for the exit, bounded
            elif select.select([fd], [], [], 0.1)[0]:
                try:
                    os.read(fd, 65536)
                except OSError:
                    closed = True  # the app let go of the terminal
        return cond()

    ended: list[int] = []

    def exited() -> bool:
        if not ended and os.waitpid(pid, os.WNOHANG)[0] == pid:
            ended.append(pid)
        return bool(ended)

    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        assert drain_until(mark.exists, 120), "the dashboard never asked the debug server"
        os.write(fd, b"q")
        assert drain_until(exited, 60), "the process stayed after q (the trickle goes on)"
    finally:
        if not ended:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
        for child in server:
            child.kill()
