"""Drive a program in a real tmux pane, as a person at a terminal would: keys in, screen out.

Each Tmux has its own server socket, so tests never touch a user's (or each other's) tmux.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time

import pytest

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    def __init__(self, cols: int = 80, rows: int = 24) -> None:
        self.socket = f"gputui-test-{os.getpid()}-{time.monotonic_ns()}"
        self.cols, self.rows = cols, rows

    def _tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=10,
        )

    def start(
        self, argv: list[str], env: dict[str, str] | None = None, output: str | None = None
    ) -> None:
        """Run `argv` in a new session; the pane stays open after it exits (to read it).
        An OSC 52 clipboard write lands in a tmux buffer (`buffers`); with `output`, every
        byte the program writes to the terminal is copied into that file. Both are set in
        the command that starts the pane, before the program can write anything."""
        sets = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
        # pytest sets COLUMNS/LINES for its own output; a program in the pane would lay out
        # for them instead of the pane's size.
        cmd = f"exec env -u COLUMNS -u LINES TERM=xterm-256color {sets} {shlex.join(argv)}"
        then = [";", "set-option", "-t", "t", "remain-on-exit", "on"]
        then += [";", "set-option", "-g", "set-clipboard", "on"]
        if output is not None:
            then += [";", "pipe-pane", "-o", "-t", "t", f"cat > {shlex.quote(output)}"]
        r = self._tmux(
            "new-session", "-d", "-s", "t", "-x", str(self.cols), "-y", str(self.rows), cmd, *then
        )
        assert r.returncode == 0, r.stderr

    def keys(self, *keys: str) -> None:
        for k in keys:
            self._tmux("send-keys", "-t", "t", k)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "t").stdout

    def wait_for(self, *needles: str, timeout: float = 30.0) -> str:
        """The screen once it shows every needle; fails with the screen after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if all(n in text for n in needles):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"not on screen within {timeout} s: {needles}\n{text}")
            time.sleep(0.1)

    def wait(self, ok, what: str, timeout: float = 30.0) -> str:
        """The screen once `ok(screen)` holds; fails with the screen after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if ok(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"not seen within {timeout} s: {what}\n{text}")
            time.sleep(0.1)

    def wait_gone(self, needle: str, timeout: float = 15.0) -> str:
        """The screen once `needle` has left it (a pane closed, a filter cleared)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if needle not in text:
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"still on screen after {timeout} s: {needle}\n{text}")
            time.sleep(0.1)

    def title(self) -> str:
        """The pane's title, as a program sets it with OSC 0 or 2."""
        return self._tmux("display", "-p", "-t", "t", "#{pane_title}").stdout.rstrip("\n")

    def buffers(self) -> list[str]:
        """tmux's paste buffers: where an OSC 52 clipboard write lands (set-clipboard on)."""
        return self._tmux("list-buffers", "-F", "#{buffer_sample}").stdout.splitlines()

    def pane_dead(self) -> bool:
        return self._tmux("display", "-p", "-t", "t", "#{pane_dead}").stdout.strip() == "1"

    def close(self) -> None:
        self._tmux("kill-server")
