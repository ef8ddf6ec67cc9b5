"""What a stack dump of every local rank says, read by gputui.diagnose.hang.culprit (pure).

Covers: the real py-spy output of the hung 2 x H200 job (tests/data/h200x2-tool-output), the
user frame chosen past torch, threading, the stdlib, site-packages, `<frozen ...>` and
native frames; the collective a waiting rank sits in and the user line that entered it;
"ranks entered different collectives"; a gone rank; failed dumps with their reason and fix;
a record body that is not what gputui writes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.collect.frames import MAX_FRAMES, Frame, RankStack, rank_stacks_of_record
from gputui.diagnose.hang.culprit import explain_stacks
from gputui.diagnose.hang.stack_reading import is_library, read_stack
from gputui.diagnose.verdict import Verdict, verdict_to_json
from gputui.tools.attach.dumpall import DumpAll, group_dumps, parse_py_spy, stacks_record
from gputui.tools.attach.rank_dump import RankDump
from gputui.tools.result import Outcome, ToolResult

H200 = Path(__file__).parent / "data" / "h200x2-tool-output"


def real_record(mode: str, pids: tuple[int, int]) -> dict:
    """A stacks record built from the real dumps, as the auto-dump builds it."""
    dumps = []
    for rank, pid in enumerate(pids):
        lines = tuple((H200 / f"dump_{mode}_{rank}.txt").read_text().splitlines())
        if any(ln.startswith("Thread ") for ln in lines):
            res = ToolResult("py-spy", pid, Outcome.DONE, "", lines)
        else:
            res = ToolResult("py-spy", pid, Outcome.GONE, f"process {pid} exited while py-spy ran")
        dumps.append(RankDump(pid, rank, res, parse_py_spy(lines) if res.ok else ()))
    res_all = DumpAll(group_dumps(dumps), tuple(dumps), 0.01)
    rec = stacks_record(res_all, t=1.0, job="master:127.0.0.1:29512", trigger="stalled")
    for rank, r in enumerate(rec["ranks"]):
        r["gpu"] = rank  # rank r ran on GPU r
    return rec


def stalled(spinning=(0,), suspects=(1,), vanished=()) -> Verdict:
    return Verdict(t=2.0, state="stalled", spinning=spinning, suspects=suspects, vanished=vanished)


def record(*ranks: RankStack) -> dict:
    return {"type": "stacks", "t": 1.0, "job": "j", "ranks": [r.to_json() for r in ranks]}


def frames(*labels: str) -> tuple[Frame, ...]:
    """Frames from `func (file:line)` labels, innermost first."""
    out = []
    for lab in labels:
        func, _, rest = lab.partition(" (")
        file, _, line = rest.rstrip(")").rpartition(":")
        if not line.isdigit():
            file, line = rest.rstrip(")"), ""
        out.append(Frame(func, file, int(line) if line else None))
    return tuple(out)


# ---------------------------------------------------------------- the real H200 dumps


def test_the_real_stuck_rank_is_named_with_its_line_and_the_waiting_rank_with_its_call():
    ev = explain_stacks(real_record("stall_in_loop", (814, 815)), stalled(), None)
    assert ev.culprit_frame == "<module> (worker2.py:37)"
    assert ev.findings == (
        "rank 1 (pid 815) is in <module> (worker2.py:37)",
        "rank 0 waits in synchronize (worker2.py:21)",
    )
    waiting, suspect = ev.stacks
    assert waiting == {
        "pid": 814,
        "rank": 0,
        "gpu": 0,
        "role": "waiting",
        "outcome": "done",
        "frame": "train_step (worker2.py:21)",
        "collective": "synchronize",
        "line": "train_step (worker2.py:21)",
        "stack": [
            "synchronize (torch/cuda/__init__.py:1162)",
            "train_step (worker2.py:21)",
            "<module> (worker2.py:38)",
        ],
        "error": None,
    }
    assert suspect["role"] == "suspect" and suspect["frame"] == "<module> (worker2.py:37)"


def test_the_real_dead_rank_is_gone_and_its_peer_still_waits():
    v = stalled(vanished=(1,))
    ev = explain_stacks(real_record("rank_dies", (1024, 1025)), v, None)
    assert ev.culprit_frame is None
    assert ev.findings == (
        "rank 1 (pid 1025) is gone: its process exited",
        "rank 0 waits in synchronize (worker2.py:21)",
    )
    gone = ev.stacks[1]
    assert (gone["outcome"], gone["stack"], gone["role"]) == ("gone", [], "suspect")


def test_a_rank_whose_gpu_the_verdict_says_vanished_is_gone_even_with_an_older_stack():
    rec = real_record("stall_in_loop", (814, 815))
    ev = explain_stacks(rec, stalled(vanished=(1,)), None)
    assert ev.findings[0] == "rank 1 (pid 815) is gone: its process exited"
    assert ev.stacks[1]["stack"] == [] and ev.culprit_frame is None


# ---------------------------------------------------------------- user frames


@pytest.mark.parametrize(
    "labels, user",
    [
        (  # torch and the c10d wrapper are skipped: the user line that called all_reduce
            (
                "all_reduce (torch/distributed/distributed_c10d.py:2501)",
                "wrapper (torch/distributed/c10d_logger.py:81)",
                "train_step (train.py:44)",
                "<module> (train.py:60)",
            ),
            "train_step (train.py:44)",
        ),
        (  # threading and queue (stdlib, py-spy 0.4's Class.method names)
            (
                "Condition.wait (threading.py:331)",
                "Queue.get (queue.py:180)",
                "load_next_batch_stuck (train.py:32)",
                "<module> (train.py:50)",
            ),
            "load_next_batch_stuck (train.py:32)",
        ),
        (  # site-packages, dist-packages, absolute stdlib paths, frozen and native frames
            (
                "0x7f053c8a3e96 (libc.so.6)",
                "PyThread_acquire_lock_timed (libpython3.11.so.1.0)",
                "_bootstrap (<frozen importlib._bootstrap>:1178)",
                "select (/usr/lib/python3.12/selectors.py:415)",
                "fetch (/opt/venv/lib/python3.12/site-packages/webdataset/tariterators.py:9)",
                "read (/usr/lib/python3/dist-packages/foo/bar.py:3)",
                "next_batch (/home/me/project/data.py:88)",
                "<module> (/home/me/project/train.py:5)",
            ),
            "next_batch (/home/me/project/data.py:88)",
        ),
        (  # python -m: runpy's frames outside the script do not make it a library
            (
                "step (pkg/loop.py:7)",
                "<module> (pkg/__main__.py:3)",
                "_run_code (runpy.py:88)",
                "_run_module_as_main (runpy.py:198)",
            ),
            "step (pkg/loop.py:7)",
        ),
        (  # a script whose name is a stdlib module's is still the user's script
            ("Event.wait (threading.py:629)", "<module> (queue.py:3)"),
            "<module> (queue.py:3)",
        ),
        (  # only library frames: the innermost Python frame, not a native address
            ("0x7f01 (libcuda.so.1)", "synchronize (torch/cuda/__init__.py:1162)"),
            "synchronize (torch/cuda/__init__.py:1162)",
        ),
    ],
)
def test_the_user_frame_is_the_innermost_frame_of_user_code(labels, user):
    assert read_stack(frames(*labels)).frame.label() == user


def test_libraries_the_standard_library_and_native_frames_are_not_user_code():
    for lab in (
        "f (torch/nn/modules/module.py:1)",
        "f (threading.py:1)",
        "f (concurrent/futures/thread.py:1)",
        "f (<frozen runpy>:1)",
        "f (libnccl.so.2)",
        "0x7f (libc.so.6)",
    ):
        assert is_library(frames(lab)[0]), lab
    for lab in ("f (train.py:1)", "f (src/model.py:1)", "f (<string>:1)"):
        assert not is_library(frames(lab)[0]), lab


def test_a_stdlib_recv_is_a_queue_not_a_collective():
    r = read_stack(
        frames(
            "Connection.recv (multiprocessing/connection.py:250)",
            "get_batch (train.py:12)",
        )
    )
    assert r.collective is None and r.frame.label() == "get_batch (train.py:12)"


def test_collectives_are_named_as_people_say_them_with_the_call_site():
    cases = {
        "all_gather_into_tensor (torch/distributed/distributed_c10d.py:1)": "all_gather",
        "ProcessGroup.allreduce (torch/distributed/distributed_c10d.py:1)": "all_reduce",
        "broadcast_object_list (torch/distributed/distributed_c10d.py:1)": "broadcast",
        "barrier (torch/distributed/distributed_c10d.py:1)": "barrier",
        "recv (torch/distributed/distributed_c10d.py:1)": "send/recv",
        "cuCtxSynchronize_v2 (libcuda.so.580.159.04)": "synchronize",
    }
    for inner, name in cases.items():
        r = read_stack(frames(inner, "step (train.py:44)", "<module> (train.py:9)"))
        assert (r.collective, r.where()) == (name, f"{name} (train.py:44)"), inner


# ---------------------------------------------------------------- sentences


def rs(pid, rank, gpu, *labels, outcome="done", error=None):
    return RankStack(pid, rank, gpu, outcome, frames(*labels), error)


AR = ("all_reduce (torch/distributed/distributed_c10d.py:2501)", "train_step (train.py:44)")
BC = ("broadcast (torch/distributed/distributed_c10d.py:2700)", "sync_params (train.py:40)")


def test_waiting_ranks_at_one_site_are_one_sentence():
    rec = record(
        rs(900, 0, 0, *AR),
        rs(908, 1, 1, "load_next_batch_stuck (train.py:32)", "<module> (train.py:60)"),
        rs(910, 2, 2, *AR),
        rs(911, 3, 3, *AR),
    )
    ev = explain_stacks(rec, stalled(spinning=(0, 2, 3), suspects=(1,)), None)
    assert ev.findings == (
        "rank 1 (pid 908) is in load_next_batch_stuck (train.py:32)",
        "ranks 0,2,3 wait in all_reduce (train.py:44)",
    )
    assert ev.culprit_frame == "load_next_batch_stuck (train.py:32)"
    assert [s["role"] for s in ev.stacks] == ["waiting", "suspect", "waiting", "waiting"]


def test_when_every_rank_spins_different_collectives_are_the_answer():
    rec = record(rs(900, 0, 0, *BC), rs(901, 1, 1, *AR))
    ev = explain_stacks(rec, stalled(spinning=(0, 1), suspects=()), None)
    assert ev.findings == (
        "ranks entered different collectives: rank 0 in broadcast (train.py:40), "
        "rank 1 in all_reduce (train.py:44)",
    )
    assert ev.culprit_frame is None
    assert [s["collective"] for s in ev.stacks] == ["broadcast", "all_reduce"]


def test_when_every_rank_spins_at_the_same_site_the_peer_is_elsewhere():
    rec = record(rs(900, 0, 0, *AR), rs(901, 1, 1, *AR))
    ev = explain_stacks(rec, stalled(spinning=(0, 1), suspects=()), None)
    assert ev.findings == (
        "ranks 0,1 wait in all_reduce (train.py:44): every local rank is in the same "
        "collective, so the rank they wait for is on another node",
    )


def test_the_same_collective_from_two_lines_is_a_mismatch_too():
    other = ("all_reduce (torch/distributed/distributed_c10d.py:2501)", "eval_step (train.py:70)")
    rec = record(rs(900, 0, 0, *AR), rs(901, 1, 1, *other))
    ev = explain_stacks(rec, stalled(spinning=(0, 1), suspects=()), None)
    assert ev.findings[0].startswith("ranks entered different collectives: rank 0 in all_reduce")


def test_a_failed_dump_says_why_and_the_fix_once_for_all_ranks_it_hit():
    missing = "py-spy not found (looked in $GPUTUI_TOOL_PATH): pip install py-spy"
    rec = record(
        rs(900, 0, 0, outcome="missing", error=missing),
        rs(901, 1, 1, outcome="missing", error=missing),
    )
    ev = explain_stacks(rec, stalled(), None)
    assert ev.findings == (f"ranks 0,1: no stack: {missing}",)
    assert all(s["error"] == missing and s["frame"] is None for s in ev.stacks)


def test_ptrace_refusals_group_across_pids_and_keep_the_fix():
    def refused(pid):
        return f"py-spy may not attach to process {pid} (ptrace refused): run gputui with sudo"

    rec = record(
        rs(900, 0, 0, outcome="permission", error=refused(900)),
        rs(901, 1, 1, outcome="permission", error=refused(901)),
    )
    ev = explain_stacks(rec, stalled(), None)
    assert ev.findings == (
        "ranks 0,1: no stack: py-spy may not attach to the process (ptrace refused): "
        "run gputui with sudo",
    )
    one = explain_stacks(
        record(rs(901, 1, 1, outcome="permission", error=refused(901))), stalled(), None
    )
    assert one.findings == (f"rank 1: no stack: {refused(901)}",)


def test_a_timeout_says_where_the_process_may_be_and_what_to_try():
    rec = record(rs(900, 0, 0, *AR), rs(908, 1, 1, outcome="timeout", error="no result within 5 s"))
    ev = explain_stacks(rec, stalled(), None)
    assert ev.findings[-1] == (
        "rank 1: no stack: py-spy gave no stack in time (no result within 5 s): the process "
        "may be in the kernel (state D); try `gputui dump --gdb 908`"
    )


def test_a_record_body_gputui_did_not_write_is_one_finding_not_an_exception():
    for bad in (
        {"ranks": "x"},
        {"ranks": [{"outcome": "exploded"}]},
        {"ranks": [{"outcome": "done", "pid": True}]},
        {"ranks": [{"outcome": "done", "frames": [["f", "a.py", 1e999]]}]},
        {"ranks": [{"outcome": "done", "frames": [["f" * 10_000, "a.py", 1]]}]},
        {"ranks": [{"outcome": "done", "frames": [["f", "a.py", 1]] * (MAX_FRAMES + 1)}]},
    ):
        ev = explain_stacks({"type": "stacks", "t": 1.0, **bad}, stalled(), None)
        assert len(ev.findings) == 1 and ev.findings[0].startswith("the stack dump could not")
        assert ev.culprit_frame is None and ev.stacks == ()


def test_a_rank_stack_survives_its_json_form():
    r = rs(900, 0, 0, *AR)
    assert rank_stacks_of_record(record(r)) == (r,)


def test_check_json_keeps_its_first_five_keys_and_adds_the_evidence_after():
    from gputui.diagnose.evidence import fold

    v = stalled()
    assert "stacks" not in verdict_to_json(v)
    ev = explain_stacks(real_record("stall_in_loop", (814, 815)), v, None)
    d = verdict_to_json(fold(v, [ev]))
    assert list(d)[:5] == ["t", "state", "spinning", "suspects", "reason"]
    assert d["culprit_frame"] == "<module> (worker2.py:37)" and len(d["stacks"]) == 2
    assert fold(v, [ev]).key() != v.key()  # the dump's arrival is a change check prints
