"""A job that vanishes whole after a death is called on its last words, at once.

torchrun's agent checks its ranks every 0.1 s by default and ends the others with SIGTERM as
soon as one fails; the NCCL watchdog ends every waiting rank after its timeout. Either way the
whole job can leave between two samples, no peer ever seen spinning for the dead rank. Before,
gputui then said nothing and `check` exited 0 (on 4 x H200: the watchdog case). Each case here
runs real processes and the real Watcher (GPU readings synthetic, tests/synth.py, with the
ranks' real pids and their real parent), `--stall-after 60`: no clock is involved.

- a torchrun job of 3 gloo ranks (torchrun's default monitor interval), rank 1 raises: "rank 1
  died: RuntimeError: ... (train.py:N)", "ranks 0, 2 were ended by their launcher, torchrun
  (pid P), ...", exit 1;
- the same job ending normally (every rank exits 0): no alarm;
- four processes that print what the NCCL watchdog printed on 4 x H200 (tests/data/lastwords/
  h200x4_watchdog_rank*.err, unedited) and abort together: "ranks 0-2 were ended by the NCCL
  watchdog after 20 s waiting for rank 3 (collective #4, which rank 3 never entered)".
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from conftest import end_launcher
from synth import with_real_pids
from waiting import wait_until

from gputui.collect.procs.jobs import group_jobs
from gputui.diagnose import exitcodes
from gputui.watch.watcher import Watcher

DATA = Path(__file__).parent / "data" / "lastwords"

TRAIN = textwrap.dedent(
    """\
    import datetime, os, sys, time
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    print(f"READY rank={rank} pid={os.getpid()}", flush=True)
    while not os.path.exists("go"):
        time.sleep(0.05)

    def step():
        raise RuntimeError("loss is NaN at step 1207")

    if sys.argv[1] == "fail" and rank == 1:
        step()
    if sys.argv[1] == "fail":
        time.sleep(600)
    dist.destroy_process_group()
    """
)
RAISED_AT = next(i for i, ln in enumerate(TRAIN.splitlines(), 1) if "raise RuntimeError" in ln)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def sample(t: float, pids: list[int], states: list[str]):
    """with_real_pids, each rank with its real parent (its launcher) as a sample has it."""
    snap = with_real_pids(t, pids, states)
    procs = []
    for p in snap.processes:
        parent = psutil.Process(p.pid).parent()
        cmd = " ".join(parent.cmdline()) if parent is not None else None
        procs.append(replace(p, ppid=parent.pid if parent else None, parent_cmd=cmd))
    return replace(snap, processes=tuple(procs), jobs=group_jobs(procs))


def watch_vanishing(pids: list[int], go: Path | None, procs=()) -> object:
    """Every rank alive and computing, then (after `go`, or the processes told to go) every
    rank gone: the verdicts of the samples after, until one is an alarm or 30 s of them."""
    w = Watcher(60.0, 120.0, auto_dump=False, host_ranks=False)
    t = 1000.0
    try:
        w.update(sample(t, pids, ["compute"] * len(pids)))
        assert wait_until(lambda: w.rankio is not None and all(w.rankio.get(p) for p in pids))
        if go is not None:
            go.write_text("")
        for p in procs:
            p.stdin.write(b"go\n")
            p.stdin.close()
        assert wait_until(lambda: all(gone(p) for p in pids)), "the job did not end"
        none: list[int | None] = [None] * len(pids)
        v = w.update(with_real_pids(t + 0.5, none, ["free"] * len(pids)))
        for i in range(60):
            assert w.wait(60)
            v = w.update(with_real_pids(t + 1.0 + 0.5 * i, none, ["free"] * len(pids)))
            if v.alarm:
                break
        return v
    finally:
        w.close()


def start_torchrun(tmp: Path, mode: str) -> tuple[subprocess.Popen[bytes], dict[int, int]]:
    (tmp / "train.py").write_text(TRAIN)
    out = open(tmp / "job.out", "wb")  # noqa: SIM115 - the ranks inherit it
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "3",
            "--master-port",
            str(29500 + os.getpid() % 400),
            "train.py",
            mode,
        ],
        cwd=tmp,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    ranks: dict[int, int] = {}

    def ready() -> bool:
        text = (tmp / "job.out").read_text(errors="replace")
        # torchrun's ranks share one output: two READY lines can land on one line
        for r, p in re.findall(r"READY rank=(\d+) pid=(\d+)", text):
            ranks[int(r)] = int(p)
        return len(ranks) == 3

    assert wait_until(ready, 120), "torchrun's three ranks did not start"
    return agent, ranks


@pytest.mark.torch  # starts torch ranks: skipped at collection without torch
def test_a_torchrun_job_ended_by_its_agent_after_a_death_is_called_with_the_dead_rank(tmp_path):
    agent, ranks = start_torchrun(tmp_path, "fail")
    try:
        pids = [ranks[r] for r in range(3)]
        v = watch_vanishing(pids, tmp_path / "go")
    finally:
        end_launcher(agent)  # and its ranks, each in a session of its own
    assert v.state == "stalled", v.reason
    assert exitcodes.of_state(v.state) == exitcodes.HANG
    assert v.reason == f"rank 1 died: RuntimeError: loss is NaN at step 1207 (train.py:{RAISED_AT})"
    assert v.suspect_pids == (pids[1],) and v.suspects == (1,)
    assert (
        f"ranks 0, 2 were ended by their launcher, torchrun (pid {agent.pid}), without words of "
        "their own"
    ) in v.findings
    assert v.evidence["lastwords"]["ended"]["first"]["rank"] == 1


@pytest.mark.torch  # starts torch ranks: skipped at collection without torch
def test_a_torchrun_job_that_ends_normally_is_no_alarm(tmp_path):
    agent, ranks = start_torchrun(tmp_path, "end")
    try:
        v = watch_vanishing([ranks[r] for r in range(3)], tmp_path / "go")
        assert agent.wait(timeout=60) == 0
    finally:
        end_launcher(agent)
    assert v.state == "ok" and not v.alarm, v.reason


WATCHDOG = """\
import os, sys
print("ready", flush=True)
sys.stdin.readline()
sys.stderr.write(open(sys.argv[1]).read())
sys.stderr.flush()
os.abort()
"""


def test_ranks_the_nccl_watchdog_ended_with_the_whole_job_name_whom_they_waited_for(tmp_path):
    """What each rank of the 4 x H200 watchdog case wrote (its stderr file, unedited), written
    by a real process that then aborts as the watchdog's rank does; all four leave together."""
    (tmp_path / "rank.py").write_text(WATCHDOG)
    procs = []
    for r in range(4):
        with open(tmp_path / f"rank{r}.err", "wb") as err:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "rank.py", str(DATA / f"h200x4_watchdog_rank{r}.err")],
                    cwd=tmp_path,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                )
            )
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        v = watch_vanishing([p.pid for p in procs], None, procs)
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)
    assert v.state == "stalled", v.reason
    assert v.reason == (
        "ranks 0-2 were ended by the NCCL watchdog after 20 s waiting for rank 3 "
        "(collective #4, which rank 3 never entered)"
    )
    assert v.evidence["lastwords"]["ended"]["watchdog"] == {
        "ended": [0, 1, 2],
        "after_s": 20.0,
        "waited_for": [3],
        "seq": 4,
    }


GLOO_RANK = """\
import datetime, os, sys, threading, time
import torch, torch.distributed as dist

rank = int(os.environ["RANK"])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
print("ready", flush=True)

def wait_for_flag(flags):
    while not flags.get("go"):
        pass

def watchdog():  # what the NCCL watchdog of this rank wrote on 4 x H200, as it wrote it
    time.sleep(0.5)
    sys.stderr.write(open(sys.argv[1]).read())
    sys.stderr.flush()

if rank == 3:
    wait_for_flag({})
threading.Thread(target=watchdog, daemon=True).start()
dist.all_reduce(torch.ones(4))
"""


@pytest.mark.torch  # starts torch ranks: skipped at collection without torch
def test_a_live_rank_that_timed_out_in_the_nccl_watchdog_stalls_the_job_without_a_spin(tmp_path):
    """On 4 x H200 the watchdog timed ranks 0-2 out (they lived on: it dumps before it
    aborts) while NVML never read their GPUs as spinning. Here a real 4-rank gloo job: ranks
    0-2 wait in all_reduce and write what those ranks wrote to their stderr files; rank 3
    spins in its own Python loop; every GPU reads busy. The watchdog's line alone stalls the
    job, and rank 3's line (py-spy) leads."""
    (tmp_path / "rank.py").write_text(GLOO_RANK)
    port = str(29100 + os.getpid() % 300)
    procs = []
    for r in range(4):
        env = {
            **os.environ,
            "RANK": str(r),
            "WORLD_SIZE": "4",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
        }
        with open(tmp_path / f"rank{r}.err", "wb") as err:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "rank.py", str(DATA / f"h200x4_watchdog_rank{r}.err")],
                    cwd=tmp_path,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    env=env,
                )
            )
    pids = [p.pid for p in procs]
    w = Watcher(60.0, 120.0, auto_dump=True, host_ranks=False)
    t = 1000.0
    v = None

    def called() -> bool:
        nonlocal t, v
        assert w.wait(60)
        t += 0.5
        v = w.update(with_real_pids(t, pids, ["compute"] * 4))
        return v.alarm and v.stacks and any("NCCL watchdog" in f for f in v.findings)

    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        v = w.update(with_real_pids(t, pids, ["compute"] * 4))
        assert not v.alarm
        assert wait_until(called, 120), v
    finally:
        w.close()
        for p in procs:
            p.kill()
            p.wait(timeout=10)
    assert v.state == "stalled", v.reason
    assert "ranks 0-2 timed out in the NCCL watchdog after 20 s waiting for rank 3" in v.findings
    assert v.ranked[0].ranks == (3,), v.findings  # the rank waited for leads
    assert "wait_for_flag" in v.reason, v.reason
