"""Real gloo ranks of a two-rank job that gputui takes for NCCL ranks, for the live RAS tests.

Why: gputui asks NCCL's RAS only about processes with NCCL loaded; each rank preloads the
stand-in libnccl (ras_server.stand_in_nccl) and is told where RAS answers (NCCL_RAS_ADDR,
a test's ras_server). The ranks are started by the test once it knows that port, and each
prints `ready ...` once it stands where the test expects it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from conftest import free_port


class GlooRanks:
    def __init__(self, nccl: Path) -> None:
        self.nccl = nccl
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, ras_port: int, argv_of: Callable[[int], list[str]]) -> list[int]:
        """Starts ranks 0 and 1 (`argv_of(rank)`, run with this Python) and waits for each to
        say ready; their pids."""
        env = {
            **os.environ,
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(free_port()),
            "NCCL_RAS_ADDR": f"127.0.0.1:{ras_port}",
            "LD_PRELOAD": str(self.nccl),
        }
        for rank in (0, 1):
            p = subprocess.Popen(
                [sys.executable, *argv_of(rank)],
                env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
            )
            self.procs.append(p)
        for p in self.procs:
            assert p.stdout is not None and p.stdout.readline().startswith("ready "), p.pid
        return [p.pid for p in self.procs]

    def close(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait(timeout=10)
            if p.stdout is not None:
                p.stdout.close()
