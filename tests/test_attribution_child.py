"""A traceback belongs to the process that wrote it, and RAS's rank outranks an unmarked line.

Three real processes stand in for ranks 0-2 of a job, all writing stdout and stderr to one
shared file (`srun -o job.out`, a shell redirect). Rank 0 starts an uploader the way
programs do, a multiprocessing spawn child, which raises and exits: its traceback, with no
`[rankN]:` prefix, lands in the shared file. Rank 2 is the one stuck. NCCL RAS (a real TCP
server answering in NCCL's own JSON, tests/ras_server.py)
names rank 2 behind in AllReduce; the ranks preload an empty libnccl.so built here, so
gputui's own RAS poller asks it, as on a GPU node. GPU readings are synthetic (tests/synth.py).

Before: the headline read "rank 0 wrote an error and is still alive: RuntimeError: upload
failed" over RAS's rank 2. Now the child's traceback is told as the child's (context), and
RAS's rank 2 leads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ras_server import ras_json, ras_server, stand_in_nccl
from synth import with_real_pids
from waiting import wait_until

from gputui.watch.watcher import Watcher

RANK = """\
import multiprocessing as mp
import sys


def upload():
    raise RuntimeError("upload failed: HTTP 403 from the checkpoint store")


if __name__ == "__main__":
    if sys.argv[1] == "0":
        child = mp.get_context("spawn").Process(target=upload, name="uploader")
        child.start()
        child.join()
    print(f"ready {sys.argv[1]}", flush=True)
    sys.stdin.read()
"""


def ras_answer(pids: list[int]) -> bytes:
    """NCCL's RAS JSON for a 3-rank communicator: rank 2 one AllReduce behind (812 vs 813)."""
    counts = [{"AllReduce": 812 if r == 2 else 813, "Broadcast": 1} for r in range(len(pids))]
    return ras_json(pids, counts)


@pytest.fixture
def fake_nccl(tmp_path: Path) -> Path:
    """A real (empty) shared object named like NCCL, for the ranks to preload: gputui then
    finds NCCL loaded in them and asks RAS, as on a GPU node."""
    return stand_in_nccl(tmp_path)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc to build a stand-in libnccl")
def test_a_spawn_childs_traceback_is_the_childs_and_ras_names_the_culprit(tmp_path, fake_nccl):
    (tmp_path / "train.py").write_text(RANK)
    out = tmp_path / "job.out"
    with ras_server(b"") as srv:
        port = srv.port  # a free port, for the ranks' NCCL_RAS_ADDR
    env = {**os.environ, "NCCL_RAS_ADDR": f"127.0.0.1:{port}", "LD_PRELOAD": str(fake_nccl)}
    procs = []
    with open(out, "ab") as shared:
        for r in range(3):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "train.py", str(r)],
                    cwd=tmp_path,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=shared,
                    stderr=shared,
                )
            )
    pids = [p.pid for p in procs]
    try:
        assert wait_until(lambda: all(f"ready {r}" in out.read_text() for r in range(3)))
        assert "upload failed" in out.read_text()
        with ras_server(*[ras_answer(pids)] * 40, port=port):
            w = Watcher(1.0, 60.0, auto_dump=False, host_ranks=False)
            try:
                t = 1000.0
                w.update(with_real_pids(t, pids, ["compute"] * 3))
                assert wait_until(
                    lambda: w.rankio is not None and all(w.rankio.get(p) for p in pids)
                )
                # Samples until RAS has answered twice (its poller asks every 3 s) and the
                # gatherers are done, bounded.
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    t += 0.25
                    v = w.update(with_real_pids(t, pids, ["spin", "spin", "idle"]))
                    if v.ranked and v.ranked[0].source == "ras" and not w.pending():
                        break
                    time.sleep(0.05)
            finally:
                w.close()
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)
    assert v.state == "stalled" and v.suspects == (2,)
    assert "still alive" not in v.reason, v.reason
    assert v.ranked[0].ranks == (2,) and v.ranked[0].source == "ras", v.findings
    assert v.reason.startswith(f"NCCL RAS: rank 2 (127.0.0.1, pid {pids[2]}"), v.reason
    child = [f for f in v.findings if "upload failed" in f]
    assert child == [
        "a child process wrote an error into the output ranks 0-2 share "
        f"({out}): RuntimeError: upload failed: HTTP 403 from the checkpoint store (train.py:6)"
    ], v.findings
