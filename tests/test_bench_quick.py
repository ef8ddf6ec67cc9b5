"""Smoke test for bench/: the scripts import and parse their arguments.

Only that: the benchmarks themselves take seconds to minutes and measure the machine, so they
stay out of the test suite (run `python bench/run.py --quick` for the CPU-only figures).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_bench_run_help() -> None:
    r = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--quick", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "--quick" in r.stdout
