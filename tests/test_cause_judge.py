"""The cause, not the symptom, on plain data: the rules behind tests/test_cause_threads.py.

- a stacks record keeps every thread and every child of a rank, and a record written
  before (its main thread only) still reads;
- the thread that holds the GIL while the main thread waits in a collective is named;
- a child stuck in its own code while its rank waits on a queue is named, an idle worker
  (waiting on its own index queue, under its parent's forked frames) is not;
- frames that move between the same two stacks (a loop polling a flag) are no progress;
  new code reached at every dump (a compile) is; a side thread holding the GIL in one place
  is a hang however much CPU it burns;
- the early rule never calls a rank that burns CPU (torch.save's first seconds pickle with
  no byte written yet).
"""

from __future__ import annotations

import pytest

from gputui.collect.frames import ChildStack, Frame, RankStack, ThreadStack, rank_stacks_of_record
from gputui.diagnose.hang.children import (
    killed_child,
    killed_child_cause,
    own_frames,
    stuck_child,
)
from gputui.diagnose.hang.culprit import explain_stacks
from gputui.diagnose.hang.progress import explain_progress, judge_rank, no_progress
from gputui.diagnose.hang.threads import entry_lines, rank_holder
from gputui.diagnose.ranking import Strength
from gputui.diagnose.verdict import Verdict

T0 = 1_700_000_000.0

ALL_REDUCE = (
    Frame("all_reduce", "torch/distributed/distributed_c10d.py", 3252),
    Frame("train_step", "train.py", 98),
    Frame("<module>", "train.py", 140),
)
STATS = ThreadStack(
    "8479",
    "active+gil",
    "stats",
    (
        Frame("match", "re/__init__.py", 166),
        Frame("parse_record", "train.py", 13),
        Frame("Thread.run", "threading.py", 982),
    ),
)
FEEDER = ThreadStack("8480", "idle", "QueueFeederThread", (Frame("wait", "threading.py", 327),))
QUEUE_GET = (
    Frame("Connection._poll", "multiprocessing/connection.py", 440),
    Frame("Queue.get", "multiprocessing/queues.py", 113),
    Frame("_BaseDataLoaderIter.__next__", "torch/utils/data/dataloader.py", 725),
    Frame("main", "train.py", 133),
    Frame("<module>", "train.py", 140),
)
FORKED = (  # a forked worker's stack goes on into its parent's frames
    Frame("BaseProcess._bootstrap", "multiprocessing/process.py", 314),
    Frame("DataLoader.__iter__", "torch/utils/data/dataloader.py", 505),
    Frame("main", "train.py", 133),
)
IDLE_WORKER = (
    Frame("Queue.get", "multiprocessing/queues.py", 113),
    Frame("_worker_loop", "torch/utils/data/_utils/worker.py", 334),
    *FORKED,
)
STUCK_WORKER = (
    Frame("fetch_record", "data.py", 31),
    Frame("Records.__getitem__", "data.py", 20),
    Frame("_worker_loop", "torch/utils/data/_utils/worker.py", 374),
    *FORKED,
)


def stalled() -> Verdict:
    return Verdict(t=T0 + 10, state="stalled", since=T0, spinning=(0,), suspects=(1,))


def record(*ranks: RankStack) -> dict:
    return {"type": "stacks", "t": T0, "job": "j", "ranks": [r.to_json() for r in ranks]}


def rank1(**kw) -> RankStack:
    return RankStack(pid=908, rank=1, gpu=1, outcome="done", thread="idle", **kw)


def test_a_record_keeps_every_thread_and_child_and_an_old_record_still_reads():
    child = ChildStack(4242, "DataLoader worker 1", "done", STUCK_WORKER, "idle")
    s = rank1(frames=ALL_REDUCE, threads=(STATS, FEEDER), children=(child,))
    (back,) = rank_stacks_of_record(record(s))
    assert back == s
    old = {"pid": 908, "rank": 1, "gpu": 1, "outcome": "done", "frames": [], "error": None}
    (read,) = rank_stacks_of_record({"ranks": [old]})
    assert read.threads == () and read.children == ()
    with pytest.raises(ValueError):
        rank_stacks_of_record({"ranks": [{**old, "threads": [{"frames": "x"}]}]})
    with pytest.raises(ValueError):
        rank_stacks_of_record({"ranks": [{**old, "children": [{"pid": 1, "outcome": "??"}]}]})


def test_the_thread_holding_the_gil_leads_with_its_line_and_the_collective_it_holds_up():
    s = rank1(frames=ALL_REDUCE, threads=(STATS, FEEDER))
    ev = explain_stacks(record(s), stalled(), None)
    top = ev.ranked[0]
    assert top.text == (
        "rank 1: thread `stats` holds the GIL in parse_record (train.py:13); "
        "its main thread cannot leave all_reduce"
    )
    assert top.strength == Strength.CULPRIT_LINE
    assert ev.culprit_frame == "parse_record (train.py:13)"
    # The main thread running Python itself: no holder to blame.
    running = RankStack(908, 1, 1, "done", ALL_REDUCE, thread="active+gil", threads=(STATS,))
    assert rank_holder(running) is None


def test_every_thread_is_shown_the_holder_first_and_every_child():
    s = rank1(frames=ALL_REDUCE, threads=(STATS, FEEDER))
    child = ChildStack(4242, "DataLoader worker 1", "done", STUCK_WORKER[:2], "idle")
    entry = next(e for e in explain_stacks(record(s), stalled(), None).stacks if e["rank"] == 1)
    entry["children"] = [
        {
            "pid": child.pid,
            "role": child.role,
            "status": "idle",
            "stack": ["fetch_record (data.py:31)"],
        }
    ]
    lines = entry_lines(entry)
    assert lines[0] == "    thread `stats` (active+gil)  <-- holds the GIL"
    assert lines.index("    thread `MainThread`") > lines.index(
        "        parse_record (train.py:13)"
    )
    assert "    child pid 4242: DataLoader worker 1 (idle)" in lines
    assert entry_lines({"stack": ["a (b.py:1)"]}) == ["    a (b.py:1)"]  # an old entry


def test_the_worker_stuck_in_its_dataset_is_the_culprit_and_an_idle_one_is_not():
    idle = ChildStack(4241, "DataLoader worker 0", "done", IDLE_WORKER, "idle")
    stuck = ChildStack(4242, "DataLoader worker 1", "done", STUCK_WORKER, "idle")
    s = rank1(frames=QUEUE_GET, children=(idle, stuck))
    found = stuck_child(s)
    assert found is not None and found.child.pid == 4242
    ev = explain_stacks(record(s), stalled(), None)
    assert ev.ranked[0].text == (
        "DataLoader worker 1 of rank 1 (pid 4242) is stuck in fetch_record (data.py:31); "
        "rank 1 waits for it at main (train.py:133)"
    )
    assert 4242 in ev.ranked[0].pids and ev.culprit_frame == "fetch_record (data.py:31)"
    # The idle worker alone: its parent's forked `main` line is not its own code.
    assert own_frames(IDLE_WORKER)[-1].function == "_worker_loop"
    assert stuck_child(rank1(frames=QUEUE_GET, children=(idle,))) is None
    # A rank in a collective does not wait on its children.
    assert stuck_child(rank1(frames=ALL_REDUCE, children=(stuck,))) is None


def test_a_worker_killed_by_sigkill_is_told_on_this_node():
    text = "RuntimeError: DataLoader worker (pid 19088) is killed by signal: Killed. "
    assert killed_child_cause(text) == (
        "its DataLoader worker (pid 19088) was killed by SIGKILL (signal 9) on this node, "
        "as the OOM killer does (see `dmesg`)"
    )
    oom = ["Out of memory: Killed process 19088 (pt_data_worker) total-vm:1kB"]
    assert killed_child_cause(text, oom, where="gpu-7") == (
        "its DataLoader worker (pid 19088) was killed by the OOM killer (SIGKILL (signal 9)) "
        "on gpu-7"
    )
    assert killed_child_cause("DataLoader worker (pid 19088) exited normally") is None


def test_a_worker_torch_only_saw_gone_is_told_without_a_signal_it_never_learnt():
    """torch's status check can find the worker reaped before its SIGCHLD handler names the
    signal (seen in a live run under load): the rank then says only "exited unexpectedly"."""
    text = "RuntimeError: DataLoader worker (pid(s) 9649) exited unexpectedly"
    assert killed_child(text) == (9649, None)
    assert killed_child_cause(text) == (
        "its DataLoader worker (pid 9649) exited unexpectedly on this node; torch did not say "
        "how (a worker killed by the OOM killer often reads so: see `dmesg`)"
    )
    oom = ["Out of memory: Killed process 9649 (pt_data_worker) total-vm:1kB"]
    assert killed_child_cause(text, oom) == (
        "its DataLoader worker (pid 9649) was killed by the OOM killer on this node"
    )
    # Two workers gone: the first is named (torch lists them in its order).
    assert killed_child("DataLoader worker (pid(s) 12, 13) exited unexpectedly") == (12, None)


# ---------------------------------------------------------------- progress needs proof


def entry(per_s_cpu: float, dumps: list[dict], seconds: int = 10) -> dict:
    samples = [[T0 + i, 5.0 + per_s_cpu * i, 0, 0, 100 * i, 50 * i] for i in range(seconds + 1)]
    return {
        "pid": 908,
        "rank": 1,
        "gpu": 1,
        "first": [samples[0]],
        "samples": samples,
        "dumps": dumps,
    }


def dump(i: int, functions: list[str], moved: bool, new: bool, **extra) -> dict:
    return {
        "t": T0 + i,
        "outcome": "done",
        "moved": moved,
        "new": new,
        "frame": "poll_ready (train.py:40)",
        "functions": functions,
        **extra,
    }


def test_a_loop_polling_a_flag_moves_between_the_same_stacks_and_is_a_hang():
    a, b = ["poll_ready", "main"], ["Event.is_set", "poll_ready", "main"]
    dumps = [
        dump(2, a, False, False),
        dump(4, b, True, True),
        dump(6, a, True, False),
        dump(8, b, True, False),
        dump(10, a, True, False),
    ]
    j = judge_rank(entry(1.0, dumps))
    assert j is not None and j.advancing is False
    assert j.cause == "rank 1 spins in poll_ready (train.py:40), 1.0 core, nothing advances"
    v = Verdict(
        t=T0 + 10, state="stalled", since=T0, spinning=(0,), suspects=(1,), suspect_pids=(908,)
    )
    f = explain_progress({"ranks": [entry(1.0, dumps)]}, v, None).ranked[0]
    assert f.strength == Strength.CULPRIT_LINE and f.lead == j.cause
    # A record written before `new` was kept reads as before: moving frames are progress.
    old = [{k: v for k, v in d.items() if k != "new"} for d in dumps]
    assert judge_rank(entry(1.0, old)).advancing is True


def test_new_code_at_every_dump_is_progress():
    dumps = [dump(i, [f"codegen_kernel_{i}"], i > 2, i > 2) for i in (2, 4, 6, 8, 10)]
    j = judge_rank(entry(1.0, dumps))
    assert j is not None and j.advancing is True


def test_a_side_thread_holding_the_gil_in_one_place_is_a_hang_not_native_work():
    held = {
        "holder": "stats",
        "holder_frame": "parse_record (train.py:13)",
        "holder_gil": True,
        "waits_in": "all_reduce",
    }
    fns = ["all_reduce", "wrapper", "train_step", "main"]
    dumps = [dump(i, fns, False, False, **held) for i in (4, 6, 8, 10)]
    for d in dumps:
        d["frame"] = "train_step (train.py:98)"
    j = judge_rank(entry(1.0, dumps))
    assert j is not None and j.advancing is False
    assert j.cause == (
        "rank 1: thread `stats` holds the GIL in parse_record (train.py:13); "
        "its main thread cannot leave all_reduce"
    )
    without = [{k: v for k, v in d.items() if not k.startswith(("holder", "waits"))} for d in dumps]
    assert judge_rank(entry(1.0, without)).advancing is True  # as before: native work


def test_the_early_rule_never_calls_a_rank_that_burns_cpu():
    v = Verdict(
        t=T0 + 10, state="stalled", since=T0, spinning=(0,), suspects=(1,), suspect_pids=(908,)
    )
    burning = explain_progress({"ranks": [entry(1.0, [])]}, v, None)
    asleep = explain_progress({"ranks": [entry(0.0, [])]}, v, None)
    assert not no_progress(burning, (908,))
    assert no_progress(asleep, (908,))


def test_the_stack_pane_shows_the_odd_rank_whole_the_holder_first():
    from gputui.tools.attach.dumpall import group_dumps
    from gputui.tools.attach.rank_dump import RankDump
    from gputui.tools.result import Outcome, ToolResult

    main = ThreadStack("908", "idle", "MainThread", ALL_REDUCE)
    ok = ToolResult("py-spy", 908, Outcome.DONE, "")
    odd = RankDump(908, 1, ok, (main, FEEDER, STATS))
    peer = RankDump(
        907,
        0,
        ToolResult("py-spy", 907, Outcome.DONE, ""),
        (ThreadStack("907", "idle", "MainThread", (Frame("load_batch", "train.py", 7),)),),
    )
    groups = group_dumps([peer, odd])
    body = next(g for g in groups if g.members[0].pid == 908).body()
    at = body.index("pid 908, every thread and child:")
    assert body[at + 1] == "    thread `stats` (active+gil)  <-- holds the GIL"
    assert body.index("    thread `MainThread`") < body.index(
        "    thread `QueueFeederThread` (idle)"
    )


def test_a_moment_is_not_blamed_a_library_holder_or_a_main_thread_outside_a_collective():
    tqdm = ThreadStack("8481", "active+gil", "monitor", (Frame("run", "tqdm/_monitor.py", 60),))
    assert rank_holder(rank1(frames=ALL_REDUCE, threads=(tqdm,))) is None
    # Its main thread waits on a queue: its children say why, not a passing holder.
    assert rank_holder(rank1(frames=QUEUE_GET, threads=(STATS,))) is None
    assert rank_holder(rank1(frames=ALL_REDUCE, threads=(STATS,))) is not None
