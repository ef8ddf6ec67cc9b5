"""A real N-rank torch.distributed job (scripts/device/multi_worker.py, gloo on CPU processes), for
tests/test_multi_rank.py and bench/multi_rank.py.

The job is started through the worker's own `--spawn` launcher in a session of its own, so
close() ends every rank with one killpg. Its stdout lines (READY, ONSET, IN, ERROR; see the
worker's docstring) are read by a thread into a queue, and every wait on them is bounded:
nothing here sleeps to let a rank get somewhere. A rank's stderr goes to a file (tracebacks
written in pieces must not split the worker's lines).

`snapshot()` builds a GPU sample in which GPU r holds rank r's real process (pid and create
time), so the Watcher's stack gatherer runs the real py-spy against the real ranks while the
GPU readings come from tests/synth.py's measured H200 levels.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

WORKER = Path(__file__).resolve().parents[2] / "scripts" / "device" / "multi_worker.py"
_FIELDS = re.compile(r"(\w+)=(\S+)")


def fields(line: str) -> dict[str, str]:
    """`IN rank=3 pid=9 fn=x` -> {"kind": "IN", "rank": "3", "pid": "9", "fn": "x"}."""
    kind, _, rest = line.partition(" ")
    return {"kind": kind, **dict(_FIELDS.findall(rest))}


class MultiJob:
    """`n` ranks of scripts/device/multi_worker.py in `mode`, rank `odd` the one that diverges."""

    def __init__(
        self,
        n: int,
        mode: str,
        *,
        odd: int | None = None,
        lifetime: float = 180.0,
        backend: str = "gloo",
        extra: Sequence[str] = (),
    ) -> None:
        self.n, self.mode = n, mode
        self.odd = odd if odd is not None else min(3, n - 1)
        self.lines: list[dict[str, str]] = []
        self._q: queue.Queue[str | None] = queue.Queue()
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        argv = [sys.executable, str(WORKER), "--spawn", str(n), mode, f"{lifetime:g}"]
        argv += ["--backend", backend, "--odd", str(self.odd), *extra]
        env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
        self.started = time.monotonic()
        self.proc = subprocess.Popen(  # noqa: S603 - our own worker, an argument list
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=env,
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def wait_for(self, done: Callable[[list[dict[str, str]]], bool], timeout: float) -> bool:
        """Read lines until `done(lines so far)` holds (True) or `timeout` s pass (False)."""
        deadline = time.monotonic() + timeout
        while not done(self.lines):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                line = self._q.get(timeout=left)
            except queue.Empty:
                return False
            if line is None:  # the launcher ended: no more lines will come
                return done(self.lines)
            if line[:1].isupper():
                self.lines.append(fields(line))
        return True

    def of(self, kind: str) -> list[dict[str, str]]:
        return [x for x in self.lines if x["kind"] == kind]

    def in_place(self, timeout: float) -> bool:
        """Every rank stands where the mode puts it: each said IN (stuck, mismatch), or, for
        exit, the odd rank's ONSET and every other rank's IN or ERROR."""

        def done(lines: list[dict[str, str]]) -> bool:
            said = {x["rank"] for x in lines if x["kind"] in ("IN", "ERROR")}
            if self.mode == "exit":
                return any(x["kind"] == "ONSET" for x in lines) and len(said) >= self.n
            return len(said) >= self.n

        return self.wait_for(done, timeout)

    @property
    def pids(self) -> list[int]:
        """Rank r's pid at index r (from the READY lines)."""
        by_rank = {int(x["rank"]): int(x["pid"]) for x in self.of("READY")}
        return [by_rank[r] for r in range(self.n)]

    @property
    def onset_t(self) -> float:
        return float(self.of("ONSET")[0]["t"])

    def stderr_tail(self, chars: int = 2000) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-chars:]

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.stderr.close()


def snapshot(t: float, pids: Sequence[int | None], states: Sequence[str]):  # -> Snapshot
    """GPU r in states[r], holding the real process pids[r] (rank r)."""
    from synth import with_real_pids

    return with_real_pids(t, pids, states)


def watch(pids: Sequence[int], stalled: Sequence[str], dt: float = 0.25, wait: float = 60.0):
    """A Watcher fed 0.5 s of healthy samples then 2 s of `stalled` states (synthetic time),
    then the dump it started, waited for (bounded): the last verdict, with its evidence."""
    from gputui.watch.watcher import Watcher

    w = Watcher(1.0, 60.0)
    t = 1000.0
    try:
        for seconds, states in ((0.5, ["compute"] * len(pids)), (2.0, list(stalled))):
            for _ in range(round(seconds / dt)):
                w.update(snapshot(t, pids, states))
                t += dt
        if not w.wait(wait):
            raise AssertionError("the dump did not finish within its bounds")
        assert w.transitions == 1, w.transitions
        return w.latest()
    finally:
        w.close()


def line_of(path: Path, text: str) -> int:
    """The number of the first line of `path` holding `text` (so checks follow edits)."""
    for n, ln in enumerate(path.read_text().splitlines(), 1):
        if text in ln:
            return n
    raise AssertionError(f"{text!r} not in {path}")
