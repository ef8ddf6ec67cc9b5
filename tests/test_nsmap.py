"""Inside a container: NVML's pids made into pids that work here, through /dev/nvidiaN.

The rule is tested on data first (who matches whom, and when it is a guess), then with real
kernel features: processes in a real PID and mount namespace (`unshare`, as root) that hold a
stand-in `/dev/nvidia0` open, seen from outside (host pids) and from inside (in-namespace
pids), as a driver that translates pids and an old one that does not would report them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.collect.model import GpuSample
from gputui.collect.procs.nsmap import (
    PidMapper,
    PidMatch,
    holders,
    in_child_pid_namespace,
    match_pids,
    reconcile,
    unexplained_mb,
)

REPO = Path(__file__).resolve().parent.parent


def test_one_holder_of_the_gpus_node_is_a_sure_match():
    got = match_pids({4242: (0,)}, listed=[], held={7: {0}, 8: {1}})
    assert got == [PidMatch(4242, 7, 0, guess=False)]


def test_a_process_nvml_already_lists_is_not_a_candidate():
    got = match_pids({4242: (0,)}, listed=[7], held={7: {0}, 9: {0}})
    assert got == [PidMatch(4242, 9, 0, guess=False)]


def test_several_candidates_are_matched_in_start_order_and_called_a_guess():
    got = match_pids({5001: (0,), 5000: (0,)}, listed=[], held={12: {0}, 11: {0}})
    assert got == [PidMatch(5000, 11, 0, True), PidMatch(5001, 12, 0, True)]


def test_no_holder_no_match():
    assert match_pids({4242: (0,)}, listed=[], held={7: {1}}) == []
    assert match_pids({}, listed=[], held={7: {0}}) == []


def test_memory_nobody_here_holds_is_shown_only_when_it_is_a_process_worth():
    assert unexplained_mb(4502.0, [2518.0, 422.0]) == 1562.0  # the H100 measurement
    assert unexplained_mb(600.0, [500.0]) is None  # the driver's own few MiB
    assert unexplained_mb(None, [1.0]) is None


# ---------------------------------------------------------------- real namespaces

HOLDER = (
    'mount -t tmpfs gputui-dev /dev && : > /dev/nvidia0 && : > /dev/nvidiactl && exec "$0" -c "$1"'
)
HOLD_PY = (
    "import os, sys, time\n"
    "fds = [open('/dev/nvidia0'), open('/dev/nvidiactl')]\n"
    "print(os.getpid(), flush=True)\n"
    "sys.stdin.read()\n"
)


def _can_unshare() -> str | None:
    if os.geteuid() != 0:
        return "PID and mount namespaces need root"
    if shutil.which("unshare") is None:
        return "no unshare here"
    r = subprocess.run(
        ["unshare", "--pid", "--mount", "--fork", "--mount-proc", "true"],
        capture_output=True,
        timeout=10,
    )
    return None if r.returncode == 0 else f"unshare refused: {r.stderr.decode()[:100]}"


needs_unshare = pytest.mark.skipif(bool(_can_unshare()), reason=str(_can_unshare()))


@pytest.fixture
def rank_in_container():
    """A process in its own PID and mount namespace holding a stand-in /dev/nvidia0:
    returns (host pid, pid inside)."""
    procs = []

    def start() -> tuple[int, int]:
        p = subprocess.Popen(
            [
                "unshare",
                "--pid",
                "--mount",
                "--fork",
                "--mount-proc",
                "sh",
                "-c",
                HOLDER,
                sys.executable,
                HOLD_PY,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(p)
        inner = int(p.stdout.readline())
        # the host pid: the child of unshare's forked child that holds the node
        held = {pid for pid, nodes in holders().items() if 0 in nodes}
        host = next(pid for pid in held if _nspid(pid)[-1] == inner and _nspid(pid)[0] != inner)
        return host, inner

    yield start
    for p in procs:
        p.kill()
        p.wait(timeout=10)


def _nspid(pid: int) -> list[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return [int(x) for x in line.split()[1:]]
    return [pid]


@needs_unshare
def test_from_the_host_the_device_node_finds_the_ranks_host_pid(rank_in_container):
    host, inner = rank_in_container()
    assert host != inner
    assert 0 in holders()[host]
    # A driver that reports in-namespace pids to the host is not a case; but a pid that is
    # not visible here (a pid of another namespace) is matched to the holder:
    gpu = GpuSample(index=0, pids=(2**22 + 11,), proc_mem_mb=((2**22 + 11, 2518.0),))
    mapper = PidMapper()
    gpus, matched = reconcile((gpu,), mapper)
    assert gpus[0].pids == (host,)
    assert matched[host].nvml_pid == 2**22 + 11


@needs_unshare
def test_inside_a_container_an_old_drivers_host_pid_becomes_the_pid_that_works_here(tmp_path):
    """gputui runs inside the namespace beside a rank; NVML (an old driver) reports the
    rank by its host pid, which means nothing here: reconcile gives the pid that works."""
    script = tmp_path / "inside.py"
    script.write_text(
        "import json, os, subprocess, sys\n"
        "from gputui.collect.model import GpuSample\n"
        "from gputui.collect.procs.nsmap import PidMapper, reconcile\n"
        f"rank = subprocess.Popen([sys.executable, '-c', {HOLD_PY!r}], stdin=subprocess.PIPE,"
        " stdout=subprocess.PIPE, text=True)\n"
        "inner = int(rank.stdout.readline())\n"
        "host_pid = 2**22 + 5  # not a pid in here\n"
        "g = GpuSample(index=0, mem_used_mb=4502.0, pids=(host_pid,),"
        " proc_mem_mb=((host_pid, 2518.0),))\n"
        "m = PidMapper()\n"
        "gpus, matched = reconcile((g,), m)\n"
        "print(json.dumps({'inner': inner, 'pids': gpus[0].pids, 'nested': m.nested,"
        " 'outside': gpus[0].mem_outside_mb, 'guess': matched[inner].guess}))\n"
        "rank.kill()\n"
    )
    r = subprocess.run(
        [
            "unshare",
            "--pid",
            "--mount",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            HOLDER.replace('-c "$1"', '"$1"'),
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["nested"] is True
    assert out["pids"] == [out["inner"]]  # the rank, by the pid that works in here
    assert out["guess"] is False  # one process here holds GPU 0's node: a sure match
    assert out["outside"] == 1984.0  # 4502 used, 2518 explained


def test_a_child_pid_namespace_is_told_by_its_inode(tmp_path):
    link = tmp_path / "pid"
    link.symlink_to("pid:[4026532178]")
    assert in_child_pid_namespace(str(link)) is True
    link.unlink()
    link.symlink_to("pid:[4026531836]")  # the kernel's initial namespace
    assert in_child_pid_namespace(str(link)) is False
    assert in_child_pid_namespace(str(tmp_path / "missing")) is False
