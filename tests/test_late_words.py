"""Arriving late: the last words of ranks gone before gputui started, from what survives them.

The parsers (gputui.diagnose.gone.late) are tested on the text torchrun's agent and srun write;
the gatherer (gputui.tools.gather.late_words, through gputui.tools.gather.lastwords) on real
processes: a living rank whose launcher (a real parent process, standing in for torchrun's
agent) holds the job's output file as its stderr, and torchelastic's error files beside the
living rank's own. Also: a rank seen alive in one sample has where it writes remembered at
once, so its death 3 s later is quoted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
from synth import with_real_pids

from gputui.collect.frames import RankStack
from gputui.collect.model import ProcessInfo, RankInfo
from gputui.collect.procs.rank_tracker import RankIOTracker
from gputui.diagnose.gone import late as L
from gputui.diagnose.gone.explain import explain_lastwords
from gputui.diagnose.verdict import Verdict
from gputui.tools.gather.lastwords import gather_lastwords
from gputui.watch.gatherers import JobTarget
from gputui.watch.watcher import Watcher

TORCHRUN_FAILURE = """\
E0507 10:11:12.345000 4100 torch/distributed/elastic/multiprocessing/api.py:869] failed \
(exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "/usr/bin/torchrun", line 8, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-07_10:11:12
  host      : node-b
  rank      : 3 (local_rank: 1)
  exitcode  : 1 (pid: 4242)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""
DATA = Path(__file__).parent / "data" / "lastwords"
RANK3 = """\
[rank3]: Traceback (most recent call last):
[rank3]:   File "/job/train.py", line 88, in <module>
[rank3]:     step()
[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered
"""


def test_torchruns_root_cause_block_and_failure_line_are_read():
    exits = L.launcher_exits(TORCHRUN_FAILURE)
    assert [(x.by, x.rank, x.local_rank, x.pid, x.code) for x in exits] == [
        ("torchrun", None, 1, 4242, 1),
        ("torchrun", 3, 1, 4242, 1),
    ]
    root = exits[1]
    assert root.host == "node-b" and root.error_file == "<N/A>"
    assert root.t == time.mktime(time.strptime("2024-05-07_10:11:12", "%Y-%m-%d_%H:%M:%S"))
    assert root.words() == "torchrun: exit code 1 (pid 4242)"


def test_sruns_task_records_are_read():
    text = (
        "srun: error: node-a: task 1: Exited with exit code 3\n"
        "srun: error: node-a: task 2: Killed\n"
    )
    got = [(x.by, x.rank, x.code, x.host) for x in L.launcher_exits(text)]
    assert got == [("srun", 1, 3, "node-a"), ("srun", 2, -9, "node-a")]
    assert L.launcher_exits(text)[1].words() == "srun: killed by signal 9"


def test_a_ranks_lines_are_its_prefixed_ones_and_dated_only_when_they_end_the_file():
    text = "[rank0]: step 5\n" + RANK3 + TORCHRUN_FAILURE
    assert L.prefixed_lines(text, 3)[-1].startswith("RuntimeError: CUDA error")
    assert L.prefixed_lines(text, 2) == []
    assert L.last_region(text, 3)  # only the agent's record follows it
    assert not L.last_region(text + "[rank0]: NCCL watchdog timeout\n", 3)
    assert not L.has_prefixes("Traceback (most recent call last):\n")


def test_the_error_files_timestamp_dates_the_death():
    doc = {"message": {"message": "RuntimeError: x", "extraInfo": {"timestamp": "1714997472"}}}
    assert L.error_file_time(json.dumps(doc)) == 1714997472.0
    assert L.error_file_time("{}") is None and L.error_file_time("not json") is None
    assert L.age_words(14) == "14 s ago" and L.age_words(14 * 60) == "14 min ago"


AGENT = """\
import os, subprocess, sys
sys.stderr.write(open(sys.argv[1]).read()); sys.stderr.flush()
rank = "import sys; print('ready', flush=True); sys.stdin.read()"
child = subprocess.Popen([sys.executable, "-c", rank],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
child.stdout.readline()
print(child.pid, flush=True)
sys.stdin.read()
"""


def test_a_launchers_output_file_and_the_error_files_speak_for_ranks_gone_before(tmp_path):
    """Rank 0 lives (its launcher holds job.out); local rank 1 left an error file; rank 3 of
    the other node is in job.out with torchrun's record of its exit."""
    attempt = tmp_path / "torchelastic" / "attempt_0"
    for lr in (0, 1):
        (attempt / str(lr)).mkdir(parents=True)
    stamp = int(time.time()) - 300
    doc = {
        "message": {
            "message": "RuntimeError: shard 17 is corrupt",
            "extraInfo": {
                "py_callstack": 'Traceback (most recent call last):\n  File "/job/train.py", '
                "line 12, in load\nRuntimeError: shard 17 is corrupt\n",
                "timestamp": str(stamp),
            },
        }
    }
    (attempt / "1" / "error.json").write_text(json.dumps(doc))
    said = tmp_path / "said.txt"
    said.write_text(RANK3 + TORCHRUN_FAILURE)
    out = tmp_path / "job.out"
    env = {
        **os.environ,
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
        "TORCHELASTIC_ERROR_FILE": str(attempt / "0" / "error.json"),
    }
    with open(out, "wb") as f:
        agent = subprocess.Popen(
            [sys.executable, "-c", AGENT, str(said)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=f,
            env=env,
            text=True,
        )
    try:
        assert agent.stdout is not None
        pid = int(agent.stdout.readline())
        rank0 = ProcessInfo(
            pid=pid,
            create_time=psutil.Process(pid).create_time(),
            gpus=(0,),
            rank=RankInfo(rank=0, local_rank=0, world_size=4, local_world_size=2),
        )
        tracker = RankIOTracker()
        snap = with_real_pids(time.time(), [pid, None], ["spin", "gone"])
        tracker.refresh_now(snap)
        v = Verdict(t=time.time(), state="stalled", spinning=(0,), suspects=(1,), vanished=(1,))
        gone = (RankStack(None, None, 1, "gone", error="its process exited before the dump"),)
        target = JobTarget(snap.jobs[0].key, "job", "stalled", v, (rank0,), gone, tracker)
        rec = gather_lastwords(target, __import__("threading").Event())
    finally:
        agent.kill()
        agent.wait(timeout=10)
    assert rec is not None and rec["late_error"] is None
    late = {e["rank"]: e for e in rec["ranks"] if e.get("late")}
    assert set(late) == {1, 3}, rec["ranks"]
    assert late[3]["held_by"].startswith("python") and late[3]["log"] == str(out)
    assert late[3]["pid"] == 4242 and late[3]["exit"]["words"] == "torchrun: exit code 1 (pid 4242)"
    assert late[3]["dated_by"] == "torchrun's record" and not late[3]["local"]
    assert late[1]["error_file"] == str(attempt / "1" / "error.json")
    assert (late[1]["died_at"], late[1]["dated_by"]) == (stamp, "its error file")
    ev = explain_lastwords(rec, v, None)
    texts = [f.text for f in ev.ranked]
    age = L.age_words(rec["t"] - stamp)
    assert f"rank 1 died {age}: RuntimeError: shard 17 is corrupt (train.py:12)" in texts
    three = next(t for t in texts if t.startswith("rank 3"))
    assert three.startswith("rank 3 (on another node) (pid 4242) died ") and three.endswith(
        ": CUDA error: an illegal memory access (train.py:88)"
    ), three
    assert all(f.strength.name == "RANK_GONE" for f in ev.ranked if f.ranks in ((1,), (3,)))


RANK1 = "import sys\nprint('ready', flush=True)\nsys.stdin.readline()\nraise RuntimeError('late')\n"


def test_a_rank_seen_alive_in_one_sample_has_where_it_writes_remembered_at_once(tmp_path):
    """Rank 1 appears in the second sample (0.1 s after the first, well within the
    tracker's 3 s refresh) and dies just after: its traceback is still quoted."""
    log = tmp_path / "rank1.err"
    waiter = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    with open(log, "wb") as err:
        r1 = subprocess.Popen(
            [sys.executable, "-c", RANK1], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
        )
    w = Watcher(1.0, 60.0, auto_dump=False, host_ranks=False)
    try:
        for p in (waiter, r1):
            assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        t = 1000.0
        w.update(with_real_pids(t, [waiter.pid, None], ["compute", "free"]))
        deadline = time.monotonic() + 20
        while w.rankio is None or w.rankio.get(waiter.pid) is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        t += 0.1
        w.update(with_real_pids(t, [waiter.pid, r1.pid], ["compute", "compute"]))
        while w.rankio.get(r1.pid) is None:  # no 3 s wait: looked at from this sample
            assert time.monotonic() < deadline, "rank 1 was not looked at at once"
            time.sleep(0.01)
        assert r1.stdin is not None
        r1.stdin.write(b"go\n")
        r1.stdin.flush()
        assert r1.wait(timeout=20) == 1
        for _ in range(8):
            t += 0.25
            w.update(with_real_pids(t, [waiter.pid, None], ["spin", "gone"]))
        assert w.wait(30)
        v = w.latest()
    finally:
        w.close()
        waiter.kill()
        waiter.wait(timeout=10)
    assert (
        v is not None
        and v.findings[0] == f"rank 1 (pid {r1.pid}) died: RuntimeError: late (<string>:4)"
    )


def test_two_real_torchrun_agents_records_name_every_rank_with_its_pid_and_exit_code():
    """tests/data/lastwords/torchrun-two-agents-cpu.out: rank 3 raised; on gloo the others
    failed too, each agent writing its records into the one file."""
    text = (DATA / "torchrun-two-agents-cpu.out").read_text()
    blocks = {x.rank: x for x in L.launcher_exits(text) if x.rank is not None}
    assert sorted(blocks) == [0, 1, 2, 3]
    assert {x.code for x in blocks.values()} == {3} and all(x.t for x in blocks.values())
    assert blocks[3].local_rank == 1 and blocks[3].host == "localhost"
    failed = [x for x in L.launcher_exits(text) if x.rank is None]
    assert {x.pid for x in failed} <= {x.pid for x in blocks.values()}
    assert L.prefixed_lines(text, 3)[-1] == (
        "RuntimeError: rank 3: shard 17 is corrupt (injected by rank_worker.py)"
    )


def test_a_hostile_late_entry_never_raises():
    """A lastwords record from a file: late entries with fields of every wrong type."""
    import random

    rng = random.Random(32)
    junk = [None, True, 5, "x", [], {}, [1, "a"], {"words": 5}, 1e300]
    v = Verdict(t=1.0, state="stalled", suspects=(1,), vanished=(1,))
    for _ in range(300):
        e = {k: rng.choice(junk) for k in ("pid", "died_at", "exit", "looked_in", "gpus", "tail")}
        e.update(late=True, rank=rng.choice([1, 3, "x"]), gone=True, local=rng.choice(junk))
        explain_lastwords({"type": "lastwords", "t": rng.choice(junk), "ranks": [e]}, v, None)


def test_a_rank_nvml_saw_but_whose_outputs_were_never_read_is_quoted_from_its_peers_file(
    tmp_path,
):
    """It died within a sample of being seen: where it wrote was never looked at, but the
    file its living peer holds has its `[rank1]:` lines; they speak for it, under its pid."""
    out = tmp_path / "job.out"
    out.write_text(RANK3.replace("rank3", "rank1"))
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    with open(out, "ab") as f:
        peer = subprocess.Popen(
            [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"],
            stdin=subprocess.PIPE,
            stdout=f,
            env=env,
            cwd=tmp_path,  # where the gone rank's core would be: not a checkout's stray core
        )
    try:
        deadline = time.monotonic() + 30
        while "ready" not in out.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        snap = with_real_pids(time.time(), [peer.pid, None], ["spin", "gone"])
        tracker = RankIOTracker()
        tracker.refresh_now(snap)
        rank0 = snap.processes[0]
        v = Verdict(t=time.time(), state="stalled", spinning=(0,), suspects=(1,), vanished=(1,))
        gone = (RankStack(999_999, 1, 1, "gone", error="its process exited before the dump"),)
        target = JobTarget(snap.jobs[0].key, "job", "stalled", v, (rank0,), gone, tracker)
        rec = gather_lastwords(target, __import__("threading").Event())
    finally:
        peer.kill()
        peer.wait(timeout=10)
    assert rec is not None
    mine = [e for e in rec["ranks"] if e["pid"] == 999_999]
    assert len(mine) == 1 and mine[0]["late"] and mine[0]["log"] == str(out), rec["ranks"]
    texts = [f.text for f in explain_lastwords(rec, v, None).ranked]
    assert texts[0].startswith("rank 1 (pid 999999) died"), texts
    assert texts[0].endswith("CUDA error: an illegal memory access (train.py:88)"), texts


def test_the_agents_own_report_is_not_a_ranks_words():
    """In a file the ranks share with their agent, the agent's ChildFailedError traceback
    follows the dead rank's: the rank's exception is its own, and a living rank that writes
    there did not 'write an error'."""
    text = (DATA / "torchrun-two-agents-cpu.out").read_text()
    clean = L.strip_launcher(text)
    assert "ChildFailedError" not in clean and "Root Cause" not in clean
    assert "failed (exitcode" not in clean
    assert L.prefixed_lines(clean, 3) == L.prefixed_lines(text, 3)  # the ranks' lines stay
    v = Verdict(t=1.0, state="stalled", spinning=(0, 1))
    live = {"pid": 5, "rank": 0, "gone": False, "seen": True, "tail": TORCHRUN_FAILURE}
    dead = {"pid": 6, "rank": 1, "gone": True, "seen": True, "tail": RANK3.replace("3", "1")}
    dead["tail"] += TORCHRUN_FAILURE
    ev = explain_lastwords({"type": "lastwords", "t": 2.0, "ranks": [live, dead]}, v, None)
    assert [f.text for f in ev.ranked] == [
        "rank 1 (pid 6) died: CUDA error: an illegal memory access (train.py:88)"
    ]


def test_a_rank_its_launcher_stopped_after_another_failed_is_context():
    e = {"pid": 7, "rank": 2, "gone": True, "late": True, "local": False}
    e["exit"] = {"by": "torchrun", "code": -15, "words": "torchrun: killed by signal 15 (pid 7)"}
    v = Verdict(t=1.0, state="stalled", spinning=(0, 1))
    (f,) = explain_lastwords({"type": "lastwords", "t": 2.0, "ranks": [e]}, v, None).ranked
    who = "rank 2 (on another node) (pid 7)"
    assert f.text == f"{who} was stopped by torchrun (signal 15) after a rank failed"
    assert f.strength.name == "CONTEXT"


def test_an_earlier_jobs_xid_on_the_same_gpu_is_not_this_jobs_dead_rank():
    """Seen on the GPU machine: a job started 100 s after another job's rank took an Xid 31
    on GPU 1; its own rank 1 died before gputui started and left no pid anywhere, and the
    earlier Xid (pid 2953) was taken for it. A match by GPU alone must come after the job
    was born (GPU_XID_SLACK_S), not within the 120 s that suit a match by pid."""
    from types import SimpleNamespace

    from gputui.collect.nvml.xid import XidEvent
    from gputui.tools.gather.late_words import GPU_XID_SLACK_S, _xid_on

    born = 1_795_744_290.0
    earlier = XidEvent(born - 100.0, 31, "kernel", gpu=1, pid=2953, text="NVRM: Xid 31, pid=2953")
    own = XidEvent(born + 15.0, 31, "kernel", gpu=1, pid=3932, text="NVRM: Xid 31, pid=3932")
    live = [SimpleNamespace(pid=3931)]
    target = SimpleNamespace(ranks=live, xids=(earlier,))
    assert _xid_on(target, 1, born - GPU_XID_SLACK_S) is None
    target = SimpleNamespace(ranks=live, xids=(earlier, own))
    assert _xid_on(target, 1, born - GPU_XID_SLACK_S)[0] == 3932


def test_a_rank_seen_once_has_where_it_writes_remembered_once_the_tracker_settles(tmp_path):
    """`check` waits for the tracker's first look before its first line (settle): a rank
    that dies right after that line still has its log found, not "its process has exited"
    (seen in CI on a loaded box: the look ran after the rank was gone)."""
    log = tmp_path / "rank1.log"
    with open(log, "wb") as f:
        rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=f)
    tracker = RankIOTracker()
    try:
        tracker.observe(with_real_pids(time.time(), [None, rank.pid], ["spin", "spin"]))
        assert tracker.settle(30.0)
        rank.kill()
        rank.wait(timeout=10)
        io = tracker.final(rank.pid)
    finally:
        tracker.close()
        if rank.poll() is None:
            rank.kill()
    assert io is not None and io.error is None, io
    assert io.stdout.kind == "file" and io.stdout.path == str(log)


def test_settling_a_tracker_that_never_looked_returns_at_once():
    assert RankIOTracker().settle(0.0)
