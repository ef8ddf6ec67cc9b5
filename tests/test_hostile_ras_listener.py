"""Only the job's own RAS listener is evidence: a fake on the RAS port cannot set the verdict.

Round four of the hostile sweep: a local user (as `nobody`) listened on the RAS port before
the job and answered as NCCL RAS would, naming any rank and pid; root's `gputui check` then
blamed them in its headline, in `check --json`'s suspect_pids and the exporter's
gputui_job_suspect, and the world of 4 it claimed against the job's 2 went unquestioned.
Here the fake is a real process run as uid 65534 on loopback, the ranks real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from ras_server import ras_server
from synth import snapshot

from gputui.collect.model import ProcessInfo, RankInfo
from gputui.diagnose.nccl.ras import explain_nccl
from gputui.diagnose.verdict import Verdict
from gputui.tools.gather.nccl import gather_nccl
from gputui.watch.watcher import JobTarget

DATA = Path(__file__).parent / "data" / "ras"
VERDICT = Verdict(t=1.0, state="stalled", spinning=(0,), suspects=(1,))
NOBODY = 65534

FAKE = r"""
import socket, sys
answer = sys.stdin.buffer.read()
srv = socket.create_server(("127.0.0.1", 0))
print(srv.getsockname()[1], flush=True)
while True:
    conn, _ = srv.accept()
    got = b""
    while b"STATUS\n" not in got:
        chunk = conn.recv(4096)
        if not chunk:
            break
        got += chunk
    conn.sendall(answer)
    conn.close()
"""


def _answer_naming(pids: list[int]) -> bytes:
    text = (DATA / "behind-4rank.json").read_text()
    text = text.replace('"pid": 907', f'"pid": {pids[0]}')
    return text.replace('"pid": 908', f'"pid": {pids[1]}').encode()


def _target(kids, world: int) -> JobTarget:
    procs = tuple(
        ProcessInfo(
            pid=c.pid,
            create_time=psutil.Process(c.pid).create_time(),
            gpus=(i,),
            rank=RankInfo(rank=i, world_size=world),
        )
        for i, c in enumerate(kids)
    )
    return JobTarget(key="master:x", label="job", trigger="stalled", verdict=VERDICT, ranks=procs)


def _explained(rec):
    return explain_nccl(json.loads(json.dumps(rec)), VERDICT, snapshot(1.0, ["spin", "idle"]))


def _python_for_nobody() -> str:
    """A Python that uid 65534 may run: this one, or the system's (a venv under /root is
    closed to it); the fake needs the standard library only."""
    import shutil

    for cand in (sys.executable, shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")):
        if cand and _runs_as_nobody(cand):
            return cand
    pytest.skip("no Python that uid 65534 may run (the fake listener runs as that user)")


def _runs_as_nobody(python: str) -> bool:
    try:
        r = subprocess.run(
            [python, "-c", "pass"],
            preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY)),  # noqa: PLW1509
            cwd="/",
            timeout=60,
            capture_output=True,
        )
    except OSError:
        return False
    return r.returncode == 0


@pytest.fixture
def fake_as_nobody():
    """The fake RAS listener, started as uid 65534 (root drops to it before exec)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the fake listener runs as another user (uid 65534)")
    python = _python_for_nobody()
    procs = []

    def start(answer: bytes) -> int:
        p = subprocess.Popen(
            [python, "-c", FAKE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY)),  # noqa: PLW1509
            cwd="/",
        )
        procs.append(p)
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(answer)
        p.stdin.close()
        return int(p.stdout.readline())

    yield start
    for p in procs:
        p.kill()
        p.wait(timeout=10)


def test_a_listener_of_another_user_is_not_evidence_and_blames_no_one(spawn, fake_as_nobody):
    port = fake_as_nobody(_answer_naming([1, os.getpid()]))  # "pid 1 ... is behind"
    kids = [spawn({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}) for _ in range(2)]
    rec = gather_nccl(_target(kids, world=2), threading.Event(), ras_interval=0.1)
    (q,) = rec["ras"]["queries"]  # one query: an untrusted listener is not asked twice
    assert q["outcome"] == "untrusted" and q["answer"] is None
    assert f"uid {NOBODY}" in q["error"] and "not evidence" in q["error"]
    rec["ras"]["nccl"] = {"loaded": True, "version": "2.28.9"}  # the sweep's ranks mapped it
    ev = _explained(rec)
    assert ev.suspect_pids == ()
    assert all(f.ranks == () for f in ev.ranked), ev.ranked
    (said,) = ev.findings
    assert said.startswith("NCCL RAS did not answer: the listener on 127.0.0.1:"), said
    assert "not evidence" in said


def test_a_world_larger_than_the_jobs_from_a_listener_that_is_no_rank_is_refused(spawn):
    """The same user's listener that is not one of the ranks (the test process here), naming
    a communicator of 4 ranks for a job of 2: questioned, and not evidence."""
    with ras_server(b"") as srv:
        port = srv.port
    kids = [spawn({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}) for _ in range(2)]
    answer = _answer_naming([k.pid for k in kids])
    with ras_server(answer, answer, port=port):
        rec = gather_nccl(_target(kids, world=2), threading.Event(), ras_interval=0.1)
    q = rec["ras"]["queries"][0]
    assert q["outcome"] == "untrusted", q
    assert "not one of the job's ranks" in q["error"]
    assert "communicator of 4 ranks but the job's world size is 2" in q["error"]
    assert _explained(rec).suspect_pids == ()


RANK_SERVING = r"""
import socket, threading
srv = socket.create_server(("127.0.0.1", PORT))
def serve():
    while True:
        conn, _ = srv.accept()
        got = b""
        while b"STATUS\n" not in got:
            chunk = conn.recv(4096)
            if not chunk:
                break
            got += chunk
        conn.sendall(open(ANSWER, "rb").read())
        conn.close()
threading.Thread(target=serve, daemon=True).start()
"""


def test_the_ranks_own_listener_is_evidence(spawn, tmp_path):
    """Control: rank 0 itself listens (as NCCL's RAS thread does); its answer names the rank
    behind, and its listener is said to be that rank."""
    with ras_server(b"") as srv:
        port = srv.port
    answer_file = tmp_path / "answer.json"
    answer_file.write_bytes(b"{}")
    code = RANK_SERVING.replace("ANSWER", repr(str(answer_file))).replace("PORT", str(port))
    kids = [spawn({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}, code=code)]
    kids.append(spawn({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}))
    answer_file.write_bytes(_answer_naming([k.pid for k in kids]))  # read at each query
    rec = gather_nccl(_target(kids, world=4), threading.Event(), ras_interval=0.1)
    q = rec["ras"]["queries"][0]
    assert q["outcome"] == "done", q
    assert q["listener"].endswith(f"pid {kids[0].pid}"), q
    assert len(rec["ras"]["queries"]) == 2
    ev = _explained(rec)
    assert any(f.startswith("NCCL RAS: rank 1 (") and "is behind" in f for f in ev.findings)


RANK0_WITH_CHILD = r"""
import os, subprocess, sys
drop = sys.argv[1] == "nobody"
listen = (
    "import socket, sys; s = socket.create_server(('127.0.0.1', 0)); "
    "print(s.getsockname()[1], flush=True); sys.stdin.read()"
)
child = subprocess.Popen(
    [sys.argv[2], "-c", listen], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/",
    preexec_fn=(lambda: (os.setgid(65534), os.setuid(65534))) if drop else None,
)
print(child.stdout.readline().decode().strip(), flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("child_user", ["root", "nobody"])
def test_a_debug_server_socket_of_another_user_is_no_candidate(child_user):
    """Rank 0's child listens: the job's own child is a candidate for the debug server's
    front end, a child that changed to another user (uid 65534) is not."""
    from gputui.collect.nccl.debugserver_find import front_end_candidates

    if os.geteuid() != 0:
        pytest.skip("needs root: the child changes to another user (uid 65534)")
    python = _python_for_nobody()
    rank0 = subprocess.Popen(
        [sys.executable, "-c", RANK0_WITH_CHILD, child_user, python],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert rank0.stdout is not None
        port = int(rank0.stdout.readline())
        ports = [c.port for c in front_end_candidates(rank0.pid)]
    finally:
        for child in psutil.Process(rank0.pid).children(recursive=True):
            child.kill()
        rank0.kill()
        rank0.wait(10)
    assert ports == ([port] if child_user == "root" else []), ports
