"""Two real processes standing in for ranks 0 and 1 of a job, for the last-words tests.

Why: a death is read from the dead rank's own log and the kernel's view of it, so the
ranks are real processes. Rank 0 waits on stdin (a pipe to the test); rank 1 runs
`train.py` (the test's source) with its stderr to a file in the test's directory, prints
`ready`, and does what the line written to its stdin says (`raise`, or anything to exit).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


class TwoRanks:
    def __init__(self, tmp: Path, rank1_source: str) -> None:
        self.script = tmp / "train.py"
        self.script.write_text(rank1_source)
        self.log = tmp / "rank1.err"
        waiter = "print('ready', flush=True); import sys; sys.stdin.read()"
        self.r0 = subprocess.Popen(
            [sys.executable, "-c", waiter], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        with open(self.log, "wb") as err:
            self.r1 = subprocess.Popen(
                [sys.executable, str(self.script)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=tmp,
            )
        for p in (self.r0, self.r1):
            assert p.stdout is not None and p.stdout.readline().strip() == b"ready"

    @property
    def pids(self) -> list[int]:
        return [self.r0.pid, self.r1.pid]

    def end_rank1(self, how: bytes) -> int:
        """Tells rank 1 `how` to end (b"raise": it raises) and waits for its exit code."""
        assert self.r1.stdin is not None
        self.r1.stdin.write(how + b"\n")
        self.r1.stdin.close()
        return self.r1.wait(timeout=30)

    def close(self) -> None:
        for p in (self.r0, self.r1):
            p.kill()
            p.wait(timeout=10)
