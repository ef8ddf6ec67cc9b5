"""The auto-dump against real processes: real py-spy, real ranks, synthetic GPU readings.

CI has no GPU, so the GPU side of each sample is synthetic (tests/synth.py's measured H200
readings), but the processes on those GPUs are real children with rank environments, named
by pid and create time, so the Watcher's stacks gatherer runs the real py-spy against them.
One job is a real 2-rank torch.distributed job (gloo on the CPU) whose rank 1 is stuck in a
function while rank 0 waits inside `dist.all_reduce`.

Covers: the suspect's frame and the waiting ranks' call site; different collectives; a rank
that is gone; py-spy missing (its reason and fix); a target that exits during the dump; a
rank that was stopped before stays stopped; ptrace refused (its reason and fix).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from conftest import beside_ras, free_port
from synth import DT, with_real_pids
from targets.launch import BLOCKED, Targets

from gputui.collect.model import Snapshot
from gputui.diagnose.verdict import Verdict
from gputui.tools.attach import ptrace
from gputui.tools.which import find_tool
from gputui.watch.watcher import Watcher

needs_py_spy = pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")
pytestmark = needs_py_spy

GLOO_RANK = Path(__file__).parent / "targets" / "gloo_rank.py"


@pytest.fixture
def targets() -> Iterator[Targets]:
    t = Targets()
    yield t
    t.close()


def line_of(path: Path, text: str) -> int:
    """The line number of the first line holding `text` (so tests follow edits of targets)."""
    for n, ln in enumerate(path.read_text().splitlines(), 1):
        if text in ln:
            return n
    raise AssertionError(f"{text!r} not in {path}")


def start_job(targets: Targets, roles: Sequence[str]) -> list[int]:
    env = {"WORLD_SIZE": str(len(roles)), "MASTER_ADDR": "127.0.0.1"}
    env["MASTER_PORT"] = str(free_port())
    return [
        targets.start(role, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}).pid
        for r, role in enumerate(roles)
    ]


def snapshot(t: float, pids: Sequence[int | None], states: Sequence[str]) -> Snapshot:
    """GPU r in states[r], holding the real process pids[r] (rank r); None: no process."""
    return with_real_pids(t, pids, states)


def run_until_evidence(
    w: Watcher, pids: Sequence[int | None], *segments: tuple[float, Sequence[str]]
) -> list[Verdict]:
    """Feed samples every DT (synthetic time); after the stall, wait for the dump once."""
    out, t = [], 1000.0
    for seconds, states in segments:
        for _ in range(round(seconds / DT)):
            out.append(w.update(snapshot(t, pids, states)))
            t += DT
    assert w.wait(30), "the dump did not finish within its bounds"
    out.append(w.latest())
    return out


def dump_of_stalled_job(targets, roles, states, **kw) -> tuple[list[int], Verdict, Watcher]:
    pids = start_job(targets, roles)
    w = Watcher(1.0, 60.0, **kw, host_ranks=False)
    try:
        verdicts = run_until_evidence(w, pids, (0.5, ["compute"] * len(roles)), (2.0, states))
    finally:
        w.close()
    assert w.transitions == 1
    return pids, verdicts[-1], w


def test_the_stuck_rank_is_named_by_its_function_and_the_others_by_their_collective(targets):
    roles = ["allreduce", "loader", "allreduce"]
    pids, v, _ = dump_of_stalled_job(targets, roles, ["spin", "idle", "spin"])
    loader = line_of(BLOCKED, "time.sleep(min(tick, left))")  # first sleep: the loader's
    assert v.state == "stalled" and v.suspects == (1,)
    assert v.culprit_frame == f"wait_for_the_data_loader (blocked.py:{loader})"
    assert (
        v.findings[0]
        == f"rank 1 (pid {pids[1]}) is in wait_for_the_data_loader (blocked.py:{loader})"
    )
    assert re.fullmatch(r"ranks 0,2 wait in all_reduce \(blocked\.py:\d+\)", v.findings[1])
    assert [(s["pid"], s["rank"], s["gpu"], s["role"]) for s in v.stacks] == [
        (pids[0], 0, 0, "waiting"),
        (pids[1], 1, 1, "suspect"),
        (pids[2], 2, 2, "waiting"),
    ]
    assert all(s["outcome"] == "done" and s["error"] is None for s in v.stacks)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_a_real_torch_job_names_the_stuck_function_and_the_line_that_entered_all_reduce(
    targets,
):
    """A real 2-rank gloo job: the frames come from real torch.distributed."""
    port = str(free_port())
    env = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
    procs = []
    for rank in (0, 1):
        argv = [sys.executable, str(GLOO_RANK), "--lifetime", "90"] + (["--stuck"] if rank else [])
        p = subprocess.Popen(
            argv,
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        targets.procs.append(p)
        procs.append(p)
    for p in procs:  # each says ready once it stands where the test expects (bounded: lifetime)
        assert p.stdout is not None and p.stdout.readline().startswith("ready "), p.pid
    pids = [p.pid for p in procs]
    w = Watcher(1.0, 60.0, host_ranks=False)
    try:
        v = run_until_evidence(w, pids, (0.5, ["compute", "compute"]), (2.0, ["spin", "idle"]))[-1]
    finally:
        w.close()
    stuck = line_of(GLOO_RANK, "time.sleep(min(1.0, left))")
    entered = line_of(GLOO_RANK, "dist.all_reduce(grad)")
    assert v.culprit_frame == f"load_next_batch_stuck (gloo_rank.py:{stuck})"
    assert beside_ras(v.findings, pids) == (  # a CUDA torch also asks RAS, which is not here
        f"rank 1 (pid {pids[1]}) is in load_next_batch_stuck (gloo_rank.py:{stuck})",
        f"rank 0 waits in all_reduce (gloo_rank.py:{entered})",
    )
    waiting = v.stacks[0]
    assert waiting["frame"] == f"train_step (gloo_rank.py:{entered})"
    assert any("torch/distributed/" in f for f in waiting["stack"])  # real torch frames


def test_ranks_in_different_collectives_are_the_finding_when_every_gpu_spins(targets):
    pids, v, _ = dump_of_stalled_job(targets, ["broadcast", "allreduce"], ["spin", "spin"])
    assert v.suspects == ()
    # The mismatch is the headline; one of its call sites (rank 1's: on a tie, the later
    # group) is the culprit's frame, where NVML alone named nothing.
    assert v.reason.startswith("ranks in different collectives: rank 0 in broadcast")
    assert re.fullmatch(r"\w+ \(blocked\.py:\d+\)", v.culprit_frame or ""), v.culprit_frame
    bc = line_of(BLOCKED, "def broadcast") + 3
    assert re.fullmatch(
        rf"ranks entered different collectives: rank 0 in broadcast \(blocked\.py:{bc}\), "
        r"rank 1 in all_reduce \(blocked\.py:\d+\)",
        v.findings[0],
    ), v.findings
    assert [s["collective"] for s in v.stacks] == ["broadcast", "all_reduce"]


def test_a_rank_that_died_is_gone_and_its_peer_still_waits(targets):
    pids = start_job(targets, ["allreduce", "loader"])
    w = Watcher(1.0, 60.0, host_ranks=False)
    try:
        w.update(snapshot(999.0, pids, ["compute", "compute"]))  # both seen alive
        dead = targets.procs[1]
        dead.kill()
        dead.wait(timeout=10)
        v = run_until_evidence(
            w, [pids[0], None], (0.5, ["compute", "gone"]), (2, ["spin", "gone"])
        )[-1]
    finally:
        w.close()
    assert v.vanished == (1,)
    # Its last words lead (killed: none, said honestly, with where it wrote), then the stacks;
    # their "rank 1 is gone: its process exited" would say the same again, so it is left out.
    assert v.findings[0].startswith(f"rank 1 (pid {pids[1]}) exited; no message found")
    assert not any(f.endswith("is gone: its process exited") for f in v.findings)
    assert re.fullmatch(r"rank 0 waits in all_reduce \(blocked\.py:\d+\)", v.findings[1])
    gone = v.stacks[1]
    assert (gone["pid"], gone["outcome"], gone["stack"], gone["role"]) == (
        pids[1],
        "gone",
        [],
        "suspect",
    )


def test_py_spy_missing_says_so_and_how_to_get_it(targets, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTUI_TOOL_PATH", str(tmp_path))  # an empty directory
    _, v, _ = dump_of_stalled_job(targets, ["allreduce", "loader"], ["spin", "idle"])
    assert v.culprit_frame is None
    assert v.findings == (
        "ranks 0,1: no stack: py-spy not found (looked in $GPUTUI_TOOL_PATH): pip install "
        "py-spy (into any Python; gputui also looks beside sys.executable)",
    )
    assert [s["outcome"] for s in v.stacks] == ["missing", "missing"]


def test_a_rank_that_exits_while_py_spy_runs_is_reported_gone(targets, tmp_path, monkeypatch):
    """The real py-spy, started the moment its target exits (as rank 1 did on the H200)."""
    real = find_tool("py-spy")
    wrapper = tmp_path / "py-spy"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import os, signal, sys, time\n"
        "pid = int(sys.argv[sys.argv.index('--pid') + 1])\n"
        "if os.environ.get('KILL_PID') == str(pid):\n"
        "    os.kill(pid, signal.SIGKILL)\n"
        "    deadline = time.monotonic() + 10\n"
        "    while time.monotonic() < deadline:\n"  # until the kernel has it as a zombie
        "        state = open(f'/proc/{pid}/stat').read().rpartition(')')[2].split()[0]\n"
        "        if state in 'ZX':\n"
        "            break\n"
        f"os.execv({real!r}, [{real!r}, *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("GPUTUI_TOOL_PATH", str(tmp_path))
    pids = start_job(targets, ["allreduce", "loader"])
    monkeypatch.setenv("KILL_PID", str(pids[1]))
    w = Watcher(1.0, 60.0, host_ranks=False)
    try:
        v = run_until_evidence(w, pids, (0.5, ["compute"] * 2), (2.0, ["spin", "idle"]))[-1]
    finally:
        w.close()
    entry = v.stacks[1]
    assert entry["outcome"] == "gone" and entry["stack"] == []
    assert entry["error"] == f"process {pids[1]} exited while py-spy ran"
    # The last words are read beside the stacks, from the same moment: when they look after
    # the kill, their "exited; no message found in its log (...)" leads instead. Either way
    # the first thing said is that rank 1's process ended.
    first = v.findings[0]
    assert first.startswith(f"rank 1 (pid {pids[1]}) "), first
    assert first.endswith("is gone: its process exited") or " exited; " in first, first
    assert v.stacks[0]["outcome"] == "done"


def test_a_rank_that_was_stopped_before_stays_stopped(targets):
    pids = start_job(targets, ["allreduce", "loader"])
    os.kill(pids[1], signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 10
        while ptrace.state_letter(pids[1]) != "T":
            assert time.monotonic() < deadline, "SIGSTOP did not land"
            time.sleep(0.005)
        w = Watcher(1.0, 60.0, host_ranks=False)
        try:
            v = run_until_evidence(w, pids, (0.5, ["compute"] * 2), (2.0, ["spin", "idle"]))[-1]
        finally:
            w.close()
        assert ptrace.state_letter(pids[1]) == "T"  # someone stopped it on purpose
        assert len(v.stacks) == 2
    finally:
        os.kill(pids[1], signal.SIGCONT)


def _without_cap_sys_ptrace() -> None:
    """preexec_fn: drop CAP_SYS_PTRACE from the bounding set: root in a container without
    SYS_PTRACE, so the kernel really refuses the attach to a non-dumpable rank."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(24, 19, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
        os._exit(99)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root able to drop CAP_SYS_PTRACE")
def test_a_refused_attach_says_ptrace_and_how_to_allow_it(targets):
    p = targets.start("loader", undumpable=True, env={"RANK": "1", "WORLD_SIZE": "2"})
    code = (
        "import json, sys, psutil\n"
        "from gputui.collect.model import ProcessInfo, RankInfo\n"
        "from gputui.diagnose.hang.culprit import explain_stacks\n"
        "from gputui.diagnose.verdict import Verdict\n"
        "from gputui.watch.watcher import JobTarget, gather_stacks\n"
        "import threading\n"
        f"pid = {p.pid}\n"
        "proc = ProcessInfo(pid, psutil.Process(pid).create_time(), gpus=(1,), "
        "rank=RankInfo(rank=1))\n"
        "v = Verdict(t=1.0, state='stalled', spinning=(0,), suspects=(1,))\n"
        "rec = gather_stacks(JobTarget('j', 'j', 'stalled', v, (proc,)), threading.Event())\n"
        "print(json.dumps(explain_stacks(rec, v, None).findings))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=_without_cap_sys_ptrace,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    (finding,) = json.loads(out.stdout.strip().splitlines()[-1])
    if "is in wait_for_the_data_loader" in finding:
        pytest.skip("this sandbox lets the attach through: ptrace permissions not enforced")
    assert finding.startswith(f"rank 1: no stack: py-spy may not attach to process {p.pid}")
    assert "(ptrace refused)" in finding and "--cap-add SYS_PTRACE" in finding
    assert ptrace.state_letter(p.pid) != "T"
