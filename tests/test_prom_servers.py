"""`check --prometheus` against servers that fail: refused, silent, garbage, an HTTP error,
Prometheus' own `status: error`; and what a client must send: the bearer token from its file
(never shown), TLS verified against --ca-file. The failures a real Prometheus does not make
are made by a tiny server started here (OneAnswer); the main path runs against a real
Prometheus in tests/test_prom_history.py.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading

import pytest
from prom_history import check, one_line_error


def test_an_unreachable_server_is_one_line_and_exit_2():
    from conftest import free_port

    url = f"http://127.0.0.1:{free_port()}"
    r = check("--prometheus", url, "--from", "1h ago")
    one_line_error(r, "127.0.0.1", "refused")


class OneAnswer:
    """A tiny HTTP server on loopback that answers every request with `body` and keeps
    what it was asked (for the failures a real Prometheus does not make)."""

    def __init__(self, body: bytes, status: str = "200 OK", tls: ssl.SSLContext | None = None):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(8)
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.srv.getsockname()[1]}"
        self.requests: list[bytes] = []
        self.stop = threading.Event()
        self.reply = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.srv.settimeout(0.5)
        while not self.stop.is_set():
            try:
                conn, _ = self.srv.accept()
            except OSError:
                continue
            if self.tls is not None:
                try:
                    conn.settimeout(10)
                    conn = self.tls.wrap_socket(conn, server_side=True)
                except (OSError, ssl.SSLError):  # the client refused our certificate
                    conn.close()
                    continue
            with conn:
                conn.settimeout(10)
                data = b""
                while not self._whole(data):  # the request and its body, read whole
                    piece = conn.recv(65536)
                    if not piece:
                        break
                    data += piece
                self.requests.append(data)
                conn.sendall(self.reply)

    @staticmethod
    def _whole(data: bytes) -> bool:
        head, sep, body = data.partition(b"\r\n\r\n")
        if not sep:
            return False
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                return len(body) >= int(value)
        return True

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.srv.close()


EMPTY = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'


def test_the_bearer_token_is_sent_from_its_file_and_never_shown(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cr3t-t0ken-value\n")
    server = OneAnswer(EMPTY)
    try:
        r = check("--prometheus", server.url, "--from", "1h ago", "--token-file", str(token))
    finally:
        server.close()
    one_line_error(r, "no DCGM_FI_DEV_GPU_UTIL or gputui_gpu_utilization_ratio series")
    assert server.requests and all(
        b"Authorization: Bearer s3cr3t-t0ken-value\r\n" in q for q in server.requests
    )
    assert "s3cr3t" not in r.stdout + r.stderr


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_https_with_the_ca_file_that_signed_the_server_and_refused_without_it(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server = OneAnswer(EMPTY, tls=ctx)
    try:
        trusted = check("--prometheus", server.url, "--from", "1h ago", "--ca-file", str(cert))
        refused = check("--prometheus", server.url, "--from", "1h ago")
    finally:
        server.close()
    one_line_error(trusted, "has no DCGM_FI_DEV_GPU_UTIL")  # it got through TLS to the answer
    one_line_error(refused, "certificate verify failed")
    one_line_error(check("--prometheus", server.url, "--from", "1h ago", "--ca-file",
                         str(tmp_path / "none.pem")), "--ca-file")  # fmt: skip


def test_a_status_error_and_an_http_error_are_one_line_each():
    server = OneAnswer(b'{"status":"error","errorType":"timeout","error":"query timed out"}')
    try:
        one_line_error(check("--prometheus", server.url, "--from", "1h ago"), "query timed out")
    finally:
        server.close()
    server = OneAnswer(b"<html>bad gateway</html>", status="502 Bad Gateway")
    try:
        one_line_error(check("--prometheus", server.url, "--from", "1h ago"), "HTTP 502")
    finally:
        server.close()


def test_a_server_that_answers_garbage_is_one_line_and_exit_2():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        stop = threading.Event()

        def answer() -> None:
            srv.settimeout(0.5)
            while not stop.is_set():
                try:
                    conn, _ = srv.accept()
                except OSError:
                    continue
                with conn:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nnot json!")

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        try:
            url = f"http://127.0.0.1:{srv.getsockname()[1]}"
            r = check("--prometheus", url, "--from", "1h ago")
        finally:
            stop.set()
            t.join(10)
    one_line_error(r, "did not answer JSON")


def test_a_server_that_never_answers_meets_the_deadline():
    with socket.socket() as srv:  # accepts (the kernel's backlog) and says nothing
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        url = f"http://127.0.0.1:{srv.getsockname()[1]}"
        r = check("--prometheus", url, "--from", "1h ago", "--prom-timeout", "2")
    one_line_error(r, "did not answer within 2 s")
