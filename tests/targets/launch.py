"""Start and clean up the target processes the tools tests attach to."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

BLOCKED = Path(__file__).resolve().parent / "blocked.py"


class Targets:
    """Real child processes, each returned once it has said it is ready (over its stdout
    pipe); all killed by close()."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(
        self,
        role: str = "loader",
        *,
        threads: int = 0,
        tick: float | None = None,
        lifetime: float = 120.0,
        env: dict[str, str] | None = None,
        undumpable: bool = False,
        extra_args: tuple[str, ...] = (),
    ) -> subprocess.Popen[str]:
        argv = [sys.executable, str(BLOCKED), "--role", role, "--lifetime", str(lifetime)]
        if threads:
            argv += ["--threads", str(threads)]
        if tick:
            argv += ["--tick", str(tick)]
        if undumpable:
            argv.append("--undumpable")
        argv += list(extra_args)
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.procs.append(p)
        assert p.stdout is not None
        line = p.stdout.readline()  # blocks until the target is inside its function
        assert line.startswith("ready "), f"target did not start: {line!r}"
        return p

    def zombie(self) -> int:
        """A child that has exited but is not reaped yet (how a dead rank can look)."""
        p = subprocess.Popen([sys.executable, "-c", "pass"], stdout=subprocess.PIPE)
        self.procs.append(p)  # type: ignore[arg-type]
        assert p.stdout is not None
        p.stdout.read()  # EOF: the child is exiting
        deadline = time.monotonic() + 10
        while psutil.Process(p.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "child did not become a zombie"
            time.sleep(0.005)
        return p.pid

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, 18)  # SIGCONT, in case a test left it stopped
                except ProcessLookupError:
                    pass
                p.kill()
            p.wait(timeout=10)
            if p.stdout is not None:
                p.stdout.close()
