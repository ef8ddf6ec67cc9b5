"""Terminals for the app benchmarks: one app in a detached tmux session of a fixed size, or in a
pseudo-terminal this module opens itself where tmux is absent; plus CPU and peak-RSS readers.

Why two runners: tmux is what a person uses over ssh (and what the issue asks for), but a
capture-pane poll only resolves the first frame to the poll period, and some boxes have no
tmux; the pty runner reads the app's output as it comes (sub-millisecond resolution).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from typing import Any, Protocol

import psutil

ANSI = re.compile(
    rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78DEHMNOc])"
)


def shows(text: str, markers: tuple[str, ...]) -> bool:
    """Every marker is in `text`; a marker `re:PATTERN` is a regular expression (a power
    figure such as `122/700W` is what counts as a first frame with data)."""
    return all(re.search(m[3:], text) if m.startswith("re:") else m in text for m in markers)


def proc_cpu(pid: int) -> float | None:
    """CPU seconds of a process, its reaped children and its live descendants."""
    try:
        p = psutil.Process(pid)
        t = p.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for c in p.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                ct = c.cpu_times()
                total += ct.user + ct.system
        return total
    except psutil.Error:
        return None


def peak_rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return None


# ---------------------------------------------------------------- runners


class TmuxRunner:
    """One app in a detached session of a private tmux server (its own socket)."""

    kind = "tmux"

    def __init__(self, name: str, argv: list[str], cols: int, rows: int, socket: str) -> None:
        self.name, self.argv, self.cols, self.rows, self.socket = name, argv, cols, rows, socket

    def _tmux(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=10,
        )

    def start(self) -> None:
        cmd = "exec env TERM=xterm-256color " + shlex.join(self.argv)
        size = ["-x", str(self.cols), "-y", str(self.rows)]
        self._tmux("new-session", "-d", "-s", self.name, *size, cmd, check=True)
        self._tmux("set-option", "-t", self.name, "remain-on-exit", "on")

    def pid(self) -> int | None:
        out = self._tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").stdout
        return int(out.strip()) if out.strip().isdigit() else None

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.name).stdout

    def found(self, markers: tuple[str, ...]) -> float | None:
        text = self.screen()
        return time.perf_counter() if shows(text, markers) else None

    def stop(self) -> None:
        self._tmux("kill-session", "-t", self.name)

    @staticmethod
    def shutdown(socket: str) -> None:
        subprocess.run(
            ["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10, check=False
        )


class PtyRunner:
    """One app in a pseudo-terminal of a fixed size; a thread drains and scans its output."""

    kind = "pty"

    def __init__(self, name: str, argv: list[str], cols: int, rows: int) -> None:
        self.name, self.argv, self.cols, self.rows = name, argv, cols, rows
        self._pid: int | None = None
        self._fd: int | None = None
        self._text = bytearray()  # output with escape sequences dropped, until found
        self._found_at: float | None = None
        self._markers: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.bytes_read = 0

    def start(self) -> None:
        import fcntl
        import pty
        import struct
        import termios

        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(self.cols)}
        env["LINES"] = str(self.rows)
        pid, fd = pty.fork()
        if pid == 0:  # child: size the terminal before the app looks at it
            try:
                size = struct.pack("HHHH", self.rows, self.cols, 0, 0)
                fcntl.ioctl(1, termios.TIOCSWINSZ, size)
                os.execvpe(self.argv[0], self.argv, env)
            finally:
                os._exit(127)
        self._pid, self._fd = pid, fd
        self._thread = threading.Thread(target=self._drain, daemon=True, name=f"pty-{self.name}")
        self._thread.start()

    def _drain(self) -> None:
        assert self._fd is not None
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.bytes_read += len(chunk)
            if self._found_at is None:
                now = time.perf_counter()
                with self._lock:
                    self._text += ANSI.sub(b"", chunk)
                    text = self._text.decode("utf-8", "replace")
                    if self._markers and shows(text, self._markers):
                        self._found_at = now
                    elif len(self._text) > 4_000_000:
                        del self._text[:2_000_000]

    def pid(self) -> int | None:
        return self._pid

    def screen(self) -> str:
        with self._lock:
            return self._text[-3000:].decode("utf-8", "replace")

    def found(self, markers: tuple[str, ...]) -> float | None:
        with self._lock:
            if not self._markers:
                self._markers = markers
                if shows(self._text.decode("utf-8", "replace"), markers):
                    self._found_at = time.perf_counter()
            return self._found_at

    def stop(self) -> None:
        if self._pid is None:
            return
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
            try:
                os.kill(self._pid, sig)
            except ProcessLookupError:
                break
            end = time.monotonic() + wait
            while time.monotonic() < end:
                done, _ = os.waitpid(self._pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.05)
            else:
                continue
            break
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)


def pick_runner(want: str) -> str:
    if want == "auto":
        return "tmux" if shutil.which("tmux") else "pty"
    if want == "tmux" and not shutil.which("tmux"):
        raise SystemExit("tmux is not installed: use --runner pty")
    return want


class Runner(Protocol):
    kind: str

    def start(self) -> None: ...
    def pid(self) -> int | None: ...
    def screen(self) -> str: ...
    def found(self, markers: tuple[str, ...]) -> float | None: ...
    def stop(self) -> None: ...


def make_runner(kind: str, name: str, argv: list[str], cols: int, rows: int, socket: str) -> Any:
    if kind == "tmux":
        return TmuxRunner(name, argv, cols, rows, socket)
    return PtyRunner(name, argv, cols, rows)


def exited(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def tail(text: str, n: int = 300) -> str:
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-6:])[-n:] or "(no output)"
