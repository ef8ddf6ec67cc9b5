"""A real OpenSSH server on 127.0.0.1 for the tests that go through `ssh` as people do.

The server runs with its own host key, an authorized key made for the test, and a free port;
it is stopped at the end of the session. Where sshd cannot be had (not installed, not
allowed to run), the tests that need it are skipped with the reason: CI installs
Debian's openssh-server, so there they run.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import free_port

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
LOOPBACKS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
"""Where the server listens: three loopback addresses, so tests can have three "hosts" that
are each reached (and rendezvous) at an address of their own."""


@dataclass
class Sshd:
    port: int
    key: Path
    user: str

    def argv(self, *remote: str, tty: bool = False) -> list[str]:
        """`ssh [-t] 127.0.0.1 REMOTE...` with this server's key, never asking anything."""
        opts = [
            "-i", str(self.key),
            "-p", str(self.port),
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR",
            "-o", "ConnectTimeout=10",
        ]  # fmt: skip
        return ["ssh", *(["-tt"] if tty else ["-T"]), *opts, f"{self.user}@127.0.0.1", *remote]


def _wait_for_banner(port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                c.settimeout(2)
                if c.recv(64).startswith(b"SSH-"):
                    return True
        except OSError:
            time.sleep(0.1)
    return False


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> Iterator[Sshd]:
    tools = (shutil.which("ssh"), shutil.which("ssh-keygen"))
    if not Path(SSHD).exists() or None in tools:
        pytest.skip("OpenSSH (sshd, ssh, ssh-keygen) is not installed: apt install openssh-server")
    d = tmp_path_factory.mktemp("sshd")
    for name in ("host", "user"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True
        )
    (d / "authorized_keys").write_text((d / "user.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    port = free_port()
    user = (
        os.environ.get("USER")
        or subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    )
    listen = "".join(f"ListenAddress {a}\n" for a in LOOPBACKS)
    (d / "sshd_config").write_text(
        f"Port {port}\n{listen}HostKey {d / 'host'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile {d / 'sshd.pid'}\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\nPermitRootLogin yes\n"
        "PermitUserEnvironment no\nAcceptEnv LANG LC_*\nPrintMotd no\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory (root only)
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
        stdout=subprocess.DEVNULL,
        stderr=open(d / "sshd.log", "wb"),  # noqa: SIM115 - closed with the process
    )
    try:
        if not _wait_for_banner(port, time.monotonic() + 15):
            proc.kill()
            log = (d / "sshd.log").read_text(errors="replace")[-300:]
            pytest.skip(f"sshd did not start: {log}")
        yield Sshd(port, d / "user", user)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
