"""The parent side of the probe: start the torch fork server, run the rounds, enforce limits.

Why this shape: a broken link must cost one timeout and show as a failed cell, never hang the
tool. Each pair runs in its own process group (both ranks); the parent starts its clock when
it asks for the pair and, past `timeout`, SIGKILLs the whole group with os.killpg. The worker's
own NCCL/gloo timeouts sit below ours (70%), so a stuck collective usually reports itself with
a better message first; our kill is the backstop. The parent never imports torch and never
blocks on a read: worker output arrives through a reader thread and a queue polled with a
timeout, and a cancel Event stops everything within one poll.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gputui.probe.result import Pair, PairResult, ProbeReport, pair_from_worker
from gputui.probe.schedule import round_robin, rounds_with

GPU_SIZE = 256 * 2**20
GLOO_SIZE = 8 * 2**20
ITERS = {"nccl": 20, "gloo": 5}
PG_TIMEOUT_SHARE = 0.7  # the worker's NCCL/gloo timeout, as a share of ours
STARTUP_MIN_S = 60.0  # importing torch on a busy node can be slow; bounded all the same
KILL_GRACE_S = 5.0  # after SIGKILL, how long to wait for the server to report the exit
POLL_S = 0.05

GPU_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # CUDA indices = NVML / nvidia-smi indices
}


@dataclass
class ProbeConfig:
    devices: list[int]
    backend: str = "gloo"  # "nccl": real GPUs; "gloo": CPU processes as simulated devices
    size: int | None = None  # bytes per copy / all_reduce; default by backend
    timeout: float = 30.0  # per pair, seconds
    iters: int | None = None
    only: int | None = None  # probe only the pairs that include this device (a blamed GPU)

    @property
    def size_bytes(self) -> int:
        return self.size or (GPU_SIZE if self.backend == "nccl" else GLOO_SIZE)


@dataclass
class Progress:
    """Where a run stands; handed to `on_progress` from the runner's thread."""

    done: int
    total: int
    round: int  # 0-based index of the current round
    rounds: int
    running: list[Pair] = field(default_factory=list)
    last: PairResult | None = None  # the pair that just finished, if any


def worker_env(backend: str) -> dict[str, str]:
    """The workers' environment: NVLink multicast off (NVLS hangs on some nodes), async NCCL
    error handling on, CUDA device order matching NVML, and gputui importable."""
    env = dict(os.environ)
    for k, v in GPU_ENV.items():
        env.setdefault(k, v)
    if backend == "nccl":
        env.pop("CUDA_VISIBLE_DEVICES", None)  # --gpus uses NVML indices, as nvidia-smi does
    else:
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # all ranks are local; hostname may not resolve
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


@dataclass
class _Running:
    pair: Pair
    round: int
    started: float
    pid: int | None = None
    msg: dict[str, Any] | None = None
    status: int | None = None
    killed: str | None = None  # "timeout" or "cancel"
    killed_at: float = 0.0
    sent_kill: bool = False


class _Server:
    """The worker process (`python -m gputui.probe.worker`), in its own process group."""

    def __init__(self, backend: str, token: str) -> None:
        argv = [sys.executable, "-m", "gputui.probe.worker", "--run", token]
        # argv is built here (this interpreter + a module name), never a shell string
        self.proc = subprocess.Popen(  # noqa: S603
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=worker_env(backend),
        )
        self.events: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self.stderr: deque[str] = deque(maxlen=20)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._threads = [
            threading.Thread(target=self._read_out, args=(self.proc.stdout,), daemon=True),
            threading.Thread(target=self._read_err, args=(self.proc.stderr,), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_out(self, out: IO[bytes]) -> None:
        try:
            for raw in iter(out.readline, b""):
                try:
                    self.events.put(json.loads(raw))
                except ValueError:
                    self.stderr.append(raw.decode("utf-8", "replace").rstrip())
        except (OSError, ValueError):
            pass
        self.events.put(None)

    def _read_err(self, err: IO[bytes]) -> None:
        try:
            for raw in iter(err.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip()
                if line.strip():
                    self.stderr.append(line)
        except (OSError, ValueError):
            pass

    def send(self, msg: dict[str, Any]) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def why_dead(self) -> str:
        try:
            rc = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            rc = None
        last = self.stderr[-1] if self.stderr else ""
        return f"probe worker exited {rc}" + (f": {last}" if last else "")

    def close(self) -> None:
        """EOF on stdin: the server kills any pair still running, reaps, and exits."""
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=KILL_GRACE_S + 2)
        except subprocess.TimeoutExpired:
            pass
        _killpg(self.proc.pid)
        try:
            self.proc.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
            pass
        for t in self._threads:
            t.join(timeout=1)


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return next((ln.strip() for ln in reversed(lines) if ln.strip()), "")


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return str(n)


def run_probe(
    cfg: ProbeConfig,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
) -> ProbeReport:
    """Probe every pair of `cfg.devices`; never raises for a failing pair, never hangs.

    Args:
        cfg: the GPUs, backend, sizes and bounds.
        on_progress: called with each pair's Progress; None: none.
        cancel: set to stop at once (the workers are killed).

    Returns:
        The ProbeReport: every pair's copies and all_reduce, or why it failed.
    """
    start = time.monotonic()
    rounds = round_robin(cfg.devices) if cfg.only is None else rounds_with(cfg.devices, cfg.only)
    total = sum(len(r) for r in rounds)
    report = ProbeReport(
        devices=list(cfg.devices),
        backend=cfg.backend,
        size=cfg.size_bytes,
        timeout_s=cfg.timeout,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        host=socket.gethostname(),
    )
    if cfg.backend == "nccl":
        from gputui.probe.topology import pair_topology

        report.topology = pair_topology(cfg.devices)
    cancel = cancel or threading.Event()
    results: dict[Pair, PairResult] = {}

    def progress(r: int, running: list[Pair], last: PairResult | None = None) -> None:
        if on_progress is not None:
            on_progress(Progress(len(results), total, r, len(rounds), running, last))

    with tempfile.TemporaryDirectory(prefix="gputui-probe-") as tmp:
        server = _Server(cfg.backend, uuid.uuid4().hex)
        try:
            dead = _wait_ready(server, max(STARTUP_MIN_S, cfg.timeout), cancel)
            progress(0, [])
            next_id = 0
            for r, pairs in enumerate(rounds):
                if cancel.is_set() or dead:
                    break
                running: dict[int, _Running] = {}
                for pair in pairs:
                    cmd = {
                        "cmd": "pair",
                        "id": next_id,
                        "a": pair[0],
                        "b": pair[1],
                        "backend": cfg.backend,
                        "size": cfg.size_bytes,
                        "iters": cfg.iters or ITERS[cfg.backend],
                        "pg_timeout": max(1.0, cfg.timeout * PG_TIMEOUT_SHARE),
                        "stderr": str(Path(tmp) / f"pair-{next_id}.err"),
                    }
                    running[next_id] = _Running(pair, r, time.monotonic())
                    if not server.send(cmd):
                        dead = server.why_dead()
                    next_id += 1
                progress(r, list(pairs))
                dead = _run_round(server, running, cfg.timeout, cancel, dead) or dead
                for pid_, st in running.items():
                    res = _finish(st, cfg.timeout, Path(tmp) / f"pair-{pid_}.err", dead)
                    results[st.pair] = res
                    progress(r, [p for p in pairs if p not in results], res)
        finally:
            server.close()
    why = "not run: cancelled" if cancel.is_set() else f"not run: {dead}"
    for r, pairs in enumerate(rounds):
        for pair in pairs:
            res = results.get(pair) or PairResult(pair, round=r, reason=why)
            res.round = r
            report.pairs.append(res)
    report.cancelled = cancel.is_set()
    report.wall_s = time.monotonic() - start
    return report


def _wait_ready(server: _Server, limit: float, cancel: threading.Event) -> str | None:
    """None once the worker has imported torch; else why it never got there."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and not cancel.is_set():
        try:
            msg = server.events.get(timeout=POLL_S)
        except queue.Empty:
            continue
        if msg is None:
            return server.why_dead()
        if msg.get("event") == "ready":
            return None
    if cancel.is_set():
        return "cancelled"
    return f"probe worker did not start within {limit:g} s (importing torch)"


def _run_round(
    server: _Server,
    running: dict[int, _Running],
    timeout: float,
    cancel: threading.Event,
    dead: str | None,
) -> str | None:
    """Collect the round's events until every pair has exited or been given up on."""

    def open_ids() -> list[int]:
        return [i for i, st in running.items() if st.status is None and not _given_up(st)]

    while not dead and open_ids():
        try:
            msg = server.events.get(timeout=POLL_S)
        except queue.Empty:
            msg = {}
        if msg is None:
            return server.why_dead()
        st = running.get(msg.get("id", -1))
        if st is not None:
            ev = msg.get("event")
            if ev == "started":
                st.pid = int(msg["pid"])
            elif ev == "result":
                st.msg = msg
            elif ev == "exit":
                st.status = int(msg["status"])
        now = time.monotonic()
        for i in open_ids():
            st = running[i]
            if st.killed is None and cancel.is_set():
                st.killed, st.killed_at = "cancel", now
            elif st.killed is None and now - st.started > timeout:
                st.killed, st.killed_at = "timeout", now
            if st.killed and st.pid is not None and not st.sent_kill:
                _killpg(st.pid)  # both ranks: they share the pair's process group
                st.sent_kill = True
    return None


def _given_up(st: _Running) -> bool:
    return bool(st.killed) and time.monotonic() - st.killed_at > KILL_GRACE_S


def _finish(st: _Running, timeout: float, err_path: Path, dead: str | None) -> PairResult:
    elapsed = round(time.monotonic() - st.started, 3)
    if st.msg is not None:  # measured and reported, even if it then lingered and was killed
        res = pair_from_worker(st.pair, st.msg)
        res.round = st.round
        return res
    if st.killed == "timeout":
        reason = f"timed out after {timeout:g} s (pair process group killed)"
    elif st.killed == "cancel":
        reason = "cancelled"
    elif st.status is None:
        reason = dead or "worker vanished without a result"
    elif st.status < 0:
        last = _last_line(err_path)
        reason = f"worker killed by {_signal_name(-st.status)}" + (f": {last}" if last else "")
    else:
        last = _last_line(err_path)
        reason = f"worker exited {st.status}" + (f": {last}" if last else "")
    return PairResult(st.pair, round=st.round, reason=reason[:600], elapsed_s=elapsed)


def torch_installed() -> bool:
    """Whether torch can be imported, without importing it (2-7 s) in the parent.

    Returns:
        True when torch is importable (or already imported).
    """
    import importlib.util

    if "torch" in sys.modules:
        return sys.modules["torch"] is not None
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False
