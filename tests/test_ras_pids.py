"""NCCL RAS's pids, as the ranks see themselves, mapped to the pids gputui sees.

Run on the host with the job inside a PID namespace, RAS names a rank by its namespace's pid:
on the GPU machine the first stalled line named "pid 3". The gatherer records each local
rank's namespace pid (`nspid`) beside its pid here, and the explainer maps RAS's ranks
through them (same namespace pid and same GPU) before any sentence is made. The RAS answer is
the real one NCCL 2.28.9 gave for two ranks sharing GPU 0, rank 1 asleep (pids 462, 463).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from test_ras_judge import q, record, verdict_and_snap

from gputui.diagnose.nccl.pids import pid_map
from gputui.diagnose.nccl.ras import explain_nccl
from gputui.tools.gather.nccl import namespace_pid

BEHIND = "onegpu/ras-onegpu-a-json.txt"


def ras_record(local):
    return record(ras={"queries": [q(BEHIND, 10.0), q(BEHIND, 13.0)]}, local=local)


def test_a_rank_behind_is_named_by_its_pid_here_not_its_namespaces():
    v, snap = verdict_and_snap()
    local = [
        {"pid": 48210, "rank": 0, "gpus": [0], "nspid": 462},
        {"pid": 48211, "rank": 1, "gpus": [0], "nspid": 463},
    ]
    ev = explain_nccl(ras_record(local), v, snap)
    said = " ".join(ev.findings)
    assert "pid 48211" in said and "pid 463" not in said
    assert [b["pid"] for b in ev.extra["behind"]] == [48211]
    assert 48211 in ev.suspect_pids


def test_without_namespace_pids_the_answer_is_read_as_it_is():
    v, snap = verdict_and_snap()
    ev = explain_nccl(ras_record([{"pid": 463, "rank": 1, "gpus": [0]}]), v, snap)
    assert [b["pid"] for b in ev.extra["behind"]] == [463]


def test_a_namespace_pid_on_another_gpu_is_not_taken_for_a_local_rank():
    """RAS reports ranks of other nodes too; pid 463 on GPU 0 there is not our pid 463
    on GPU 3."""
    v, snap = verdict_and_snap()
    ev = explain_nccl(ras_record([{"pid": 48211, "rank": 1, "gpus": [3], "nspid": 463}]), v, snap)
    assert [b["pid"] for b in ev.extra["behind"]] == [463]


def test_junk_in_the_local_part_maps_nothing():
    assert pid_map([{"pid": "x", "nspid": 3}, {"pid": 5, "nspid": True}, 7, None]) == {}
    assert pid_map("no") == {}
    assert pid_map([{"pid": 5, "nspid": 3, "gpus": "0"}]) == {(3, None): 5}


def test_a_process_here_has_its_own_pid_as_its_namespace_pid():
    assert namespace_pid(os.getpid()) == os.getpid()
    assert namespace_pid(1 << 30) is None


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)
def test_a_process_in_its_own_pid_namespace_is_pid_1_there():
    """A real PID namespace (unshare, as a container makes one): the child is pid 1 inside."""
    child = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
         "import sys; print('up', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout.readline().strip() == "up"
        inner = [
            int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == child.pid
        ]
        assert inner, "the forked child of unshare is not visible"
        assert namespace_pid(inner[0]) == 1
    finally:
        child.kill()
        child.wait(10)


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
