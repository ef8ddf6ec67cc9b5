"""A real 2-rank gloo job whose rank 0 is a CPU-bound straggler (tests/targets/gloo_straggler.py),
started for a test and killed after it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

GLOO_STRAGGLER = Path(__file__).parent / "targets" / "gloo_straggler.py"


@contextmanager
def gloo_straggler_job(lifetime: float = 60.0) -> Iterator[list[int]]:
    """The pids of rank 0 (heavy) and rank 1, once both have completed a step. Skips the
    test where torch is not installed (the Python 3.10 run has no CPU build of it)."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    from conftest import free_port

    port = str(free_port())  # free now, and given to no other test of this run
    env = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
    procs: list[subprocess.Popen[str]] = []
    try:
        for rank in (0, 1):
            argv = [sys.executable, str(GLOO_STRAGGLER), "--lifetime", str(lifetime)]
            argv += ["--heavy"] if rank == 0 else []
            procs.append(
                subprocess.Popen(
                    argv,
                    env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,  # the peer's error when the other is killed
                    text=True,
                )
            )
        for p in procs:  # bounded by the job's own lifetime
            assert p.stdout is not None and p.stdout.readline().startswith("ready "), p.pid
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
