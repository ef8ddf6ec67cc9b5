"""A rank stopped by a signal (SIGSTOP, Ctrl-Z) is named as such, with the command that
resumes it (gputui.diagnose.hang.stopped; docs/hang-detector.md, "A stopped rank").

Its GPU reads idle like any stuck rank's, and its stack shows wherever the signal froze it;
only the process's status tells. The live tests stop a real process, read it through the
reader every face uses, and judge it behind GPU readings from tests/synth.py (no GPU here).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from conftest import run_cli
from synth import DT, gpu, timeline

from gputui.collect.model import ProcessInfo, Snapshot
from gputui.collect.procs.jobs import group_jobs
from gputui.collect.procs.reader import ProcessReader
from gputui.collect.trace.format import TraceWriter
from gputui.diagnose import exitcodes
from gputui.diagnose.hang.detector import diagnose_trace

DEADLINE_S = 30.0  # generous: a loaded CI box can be slow to deliver and report a signal


def with_state(snaps: Iterator[Snapshot], pid: int, state: str) -> Iterator[Snapshot]:
    """The same samples with process `pid`'s psutil status set to `state`."""
    for s in snaps:
        procs = tuple(replace(p, state=state) if p.pid == pid else p for p in s.processes)
        yield replace(s, processes=procs)


# ---------------------------------------------------------------- the rule on plain data


def test_a_stopped_suspect_is_named_with_the_command_that_resumes_it():
    v = diagnose_trace(with_state(timeline((12, ["spin", "idle"])), 1001, "stopped"))[-1]
    assert v.state == "stalled" and v.suspects == (1,) and v.suspect_pids == (1001,)
    assert "not spinning: GPU 1 (its process is stopped by a signal" in v.reason
    assert "`kill -CONT 1001` resumes it" in v.reason
    assert exitcodes.of_verdict(v) == exitcodes.HANG  # a stall all the same: the job waits


def test_a_rank_held_in_tracing_stop_is_no_stopped_rank():
    # gputui's own py-spy and gdb hold a rank in tracing-stop while they read its stack.
    v = diagnose_trace(with_state(timeline((12, ["spin", "idle"])), 1001, "tracing-stop"))[-1]
    assert "GPU 1 idle with its process alive" in v.reason and "kill -CONT" not in v.reason


def test_a_stopped_rank_whose_peers_do_not_spin_raises_nothing():
    # A rank paused between steps while the others compute: no stall, no words.
    vs = diagnose_trace(with_state(timeline((20, ["compute", "idle"])), 1001, "stopped"))
    assert {v.state for v in vs} == {"ok"} and not any("kill -CONT" in v.reason for v in vs)


def test_only_the_stopped_process_of_a_shared_gpu_is_listed():
    snaps = with_state(timeline((12, ["spin", "idle"])), 1001, "stopped")
    more = []
    for s in snaps:  # a second process of the job (rank 2) on GPU 1, running
        g1 = replace(s.gpus[1], pids=(1001, 1002))
        rank2 = replace(s.processes[1].rank, rank=2)
        p = replace(s.processes[1], pid=1002, rank=rank2, state="running")
        procs = (*s.processes, p)
        more.append(replace(s, gpus=(s.gpus[0], g1), processes=procs, jobs=group_jobs(procs)))
    v = diagnose_trace(more)[-1]
    assert "`kill -CONT 1001` resumes it" in v.reason and "1002`" not in v.reason


# ---------------------------------------------------------------- a real stopped process


@pytest.fixture
def two_ranks():
    """Two real processes with rank variables, as torchrun starts them; each says READY."""
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29555",
        }
        code = "import sys; print('READY', flush=True); sys.stdin.read()"
        p = subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(p)
    try:
        for p in procs:
            ready, _, _ = select.select([p.stdout], [], [], DEADLINE_S)
            assert ready and p.stdout.readline().strip() == "READY"
        yield procs
    finally:
        for p in procs:
            p.kill()  # SIGKILL ends a stopped process too
            p.wait(timeout=DEADLINE_S)


def read_until(pids: dict[int, int], pid: int, want: str) -> tuple[ProcessInfo, ...]:
    """The reader's view of the ranks once `pid`'s status is `want` (bounded wait)."""
    reader = ProcessReader()
    end = time.monotonic() + DEADLINE_S
    while True:
        procs = tuple(reader.read({p: ((g,), None) for p, g in pids.items()}))
        if any(p.pid == pid and p.state == want for p in procs):
            return procs
        assert time.monotonic() < end, f"pid {pid} never read as {want}: {procs}"
        time.sleep(0.05)  # a poll of the condition above, not a wait for it to happen


def samples(procs: tuple[ProcessInfo, ...], pids: dict[int, int], seconds: float):
    """GPU 0 spins, GPU 1 (rank 1's) is idle, for `seconds`; the real processes on them."""
    jobs = group_jobs(list(procs))
    out, t = [], 1000.0
    for _ in range(round(seconds / DT)):
        gpus = tuple(gpu(g, "spin" if g == 0 else "idle", pid=p) for p, g in pids.items())
        out.append(Snapshot(t=t, gpus=gpus, processes=procs, jobs=jobs))
        t += DT
    return out


def test_a_real_rank_stopped_with_sigstop_is_named_live_and_in_its_replay(two_ranks, tmp_path):
    rank0, rank1 = (p.pid for p in two_ranks)
    pids = {rank0: 0, rank1: 1}
    os.kill(rank1, signal.SIGSTOP)
    procs = read_until(pids, rank1, "stopped")

    v = diagnose_trace(samples(procs, pids, 12))[-1]
    assert v.state == "stalled" and v.suspect_pids == (rank1,)
    assert f"`kill -CONT {rank1}` resumes it" in v.reason

    # A recording keeps the status: `check --replay` says the same, and exits 1.
    w = TraceWriter(tmp_path / "stopped.jsonl")
    for s in samples(procs, pids, 12):
        w.write(s)
    w.close()
    r = run_cli("check", "--replay", str(tmp_path / "stopped.jsonl"))
    assert r.returncode == 1, r.stderr
    assert f"`kill -CONT {rank1}` resumes it" in r.stdout

    # Resumed, it is an idle rank like any other: the words go with the signal.
    os.kill(rank1, signal.SIGCONT)
    procs = read_until(pids, rank1, "sleeping")
    v = diagnose_trace(samples(procs, pids, 12))[-1]
    assert "GPU 1 idle with its process alive" in v.reason and "kill -CONT" not in v.reason
