"""The last-words parsers on what real rank deaths wrote (tests/data/lastwords/), and on
hostile logs: binary, huge, escape codes, no newline, cut in the middle of a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from gputui.diagnose.gone.explain import explain_lastwords
from gputui.diagnose.gone.lastwords import parse_error_file, parse_log
from gputui.diagnose.kernel_events import kernel_events, parse_kernel
from gputui.diagnose.verdict import Verdict

DATA = Path(__file__).parent / "data" / "lastwords"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_ddp_unused_parameter_error_is_quoted_with_the_culprits_line():
    w = parse_log(read("ddp_unused_rank1.txt"), rank=1)
    assert w.exception is not None
    assert w.exception.startswith("RuntimeError: Expected to have finished reduction")
    assert "find_unused_parameters=True" in w.exception  # the fix is in the first line
    assert w.frame == "ddp.py:13"
    assert w.cause() == (
        "RuntimeError: Expected to have finished reduction in the prior iteration before "
        "starting a new one. (ddp.py:13)"
    )


def test_the_peer_of_the_ddp_culprit_says_nccls_async_error_not_a_cause_of_its_own():
    w = parse_log(read("ddp_unused_rank0.txt"), rank=0)
    assert w.exception is None
    assert w.nccl == (
        "NCCL: WorkNCCL(SeqNum=8, OpType=ALLREDUCE) failed: NCCL error: remote process "
        "exited or there was a network error"
    )


def test_the_watchdog_timeout_names_the_collective_and_sequence_number():
    w = parse_log(read("watchdog_rank0_excerpt.txt"))
    assert w.nccl is not None
    assert w.nccl.startswith(
        "NCCL watchdog: collective timed out: WorkNCCL(SeqNum=2, OpType=ALLREDUCE)"
    )


def test_cuda_errors_are_the_exception_line_not_the_hints_printed_after_it():
    w = parse_log(read("xid_illegal_address_stderr.txt"))
    assert (
        w.exception
        == "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
    )
    assert w.frame == "case_illegal_address.py:9"
    w = parse_log(read("xid_device_assert_stderr.txt"))
    assert w.exception == "torch.AcceleratorError: CUDA error: device-side assert triggered"
    oom = parse_log(read("cuda_oom_stderr.txt"))
    assert oom.cause() == ("CUDA out of memory. Tried to allocate 400.00 GiB. (<string>:1)")


def test_kernel_lines_the_segfault_the_oom_killer_and_an_xid_with_its_pid():
    seg = parse_kernel(read("segfault_kernel.txt").splitlines()[0])
    assert seg is not None and (seg.how, seg.pid, seg.lib) == ("segfault", 432, "libc.so.6")
    assert seg.sentence() == "segfault in libc.so.6"
    assert parse_kernel(read("segfault_kernel.txt").splitlines()[1]) is None  # the Code: line
    xid = parse_kernel(read("xid_illegal_address_kernel.txt").strip())
    assert xid is not None and (xid.how, xid.pid, xid.xid) == ("xid", 599, 31)
    oom = parse_kernel("Out of memory: Killed process 1234 (python3) total-vm:10kB, anon-rss:2kB")
    assert oom is not None and (oom.how, oom.pid) == ("oom-kill", 1234)
    cg = parse_kernel(
        "Memory cgroup out of memory: Killed process 77 (pt_main_thread) total-vm:1kB"
    )
    assert cg is not None and cg.pid == 77
    line = "oom-kill:constraint=CONSTRAINT_MEMCG,task_memcg=/job,task=python3,pid=4242,uid=0"
    assert parse_kernel(line).pid == 4242  # type: ignore[union-attr]


def test_a_kernel_line_about_an_earlier_process_with_the_same_pid_is_not_taken():
    lines = [(100.0, "Out of memory: Killed process 555 (python3)"), (300.0, "x")]
    assert kernel_events(lines, 555, born=200.0) == ()  # pid reused: that was another process
    assert len(kernel_events(lines, 555, born=50.0)) == 1
    assert kernel_events([(400.0, "Out of memory: Killed process 5555 (python3)")], 555, None) == ()


def test_torchelastic_error_file_gives_the_message_and_the_frame():
    doc = {
        "message": {
            "message": "ValueError: bad shard index 7",
            "extraInfo": {
                "py_callstack": 'Traceback (most recent call last):\n  File "/w/train.py", '
                "line 88, in main\n    load()\nValueError: bad shard index 7\n",
                "timestamp": "1700000000",
            },
        }
    }
    w = parse_error_file(json.dumps(doc))
    assert (w.exception, w.frame) == ("ValueError: bad shard index 7", "train.py:88")
    assert parse_error_file("{not json").exception is None
    assert parse_error_file('{"message": 3}').exception is None


def test_a_cuda_exception_with_an_xid_of_its_pid_says_both():
    rec = {
        "type": "lastwords",
        "t": 1.0,
        "job": "j",
        "ranks": [
            {
                "pid": 599,
                "rank": 1,
                "gone": True,
                "seen": True,
                "create_time": 0.0,
                "stdout": {"kind": "pipe", "holder": "torchrun (pid 5)"},
                "stderr": {"kind": "pipe", "holder": "torchrun (pid 5)"},
                "tail": read("xid_illegal_address_stderr.txt"),
                "kernel": [[10.0, read("xid_illegal_address_kernel.txt").strip()]],
            }
        ],
    }
    ev = explain_lastwords(rec, Verdict(t=1.0), None)
    assert ev.ranked[0].text == (
        "rank 1 (pid 599) died: CUDA error: an illegal memory access "
        "(case_illegal_address.py:9) (Xid 31)"
    )
    assert ev.extra["ranks"][0]["last_words"]["kernel"][0].startswith("2026-11-24")


# ---------------------------------------------------------------- hostile logs


def test_binary_and_escape_codes_never_break_the_parser_and_are_shown_escaped():
    tail = (
        "\x00\xff garbage \x1b[2J\x1b]0;pwned\x07\nTraceback (most recent call last):\n"
        '  File "/w/t.py", line 3, in <module>\n    x()\n'
        "ValueError: evil \x1b[31mred\x1b[0m text\n"
    )
    rec = {"ranks": [{"pid": 9, "rank": 0, "gone": True, "seen": True, "tail": tail}]}
    ev = explain_lastwords(rec, Verdict(t=1.0), None)
    text = ev.ranked[0].text
    assert "\x1b" not in text and "\\x1b[31mred" in text
    assert text.startswith("rank 0 (pid 9) died: ValueError: evil")


def test_a_traceback_cut_before_its_exception_line_says_nothing_rather_than_guess():
    tail = 'Traceback (most recent call last):\n  File "/w/t.py", line 3, in <module>\n    x('
    assert parse_log(tail).exception is None


def test_a_huge_line_without_newline_is_cut_to_one_sentence():
    w = parse_log("Traceback (most recent call last):\nMemoryError: " + "a" * 500_000)
    assert w.exception is not None and len(w.exception) <= 400
    assert len(w.cause() or "") <= 200


def test_records_of_the_wrong_shape_give_one_sentence_not_a_traceback():
    for bad in ({}, {"ranks": "x"}, {"ranks": [1, None, {"pid": "x"}, {"pid": 1, "tail": 5}]}):
        ev = explain_lastwords(bad, Verdict(t=1.0), None)  # type: ignore[arg-type]
        assert all(isinstance(f.text, str) for f in ev.all_findings())


def test_an_alive_rank_that_wrote_an_error_is_weaker_and_a_watchdog_line_is_context():
    rec = {
        "ranks": [
            {
                "pid": 5,
                "rank": 0,
                "gone": False,
                "seen": True,
                "tail": read("watchdog_rank0_excerpt.txt"),
            },
            {
                "pid": 6,
                "rank": 1,
                "gone": False,
                "seen": True,
                "tail": read("xid_device_assert_stderr.txt"),
            },
        ]
    }
    ev = explain_lastwords(rec, Verdict(t=1.0), None)
    by_pid = {f.pids[0]: f for f in ev.ranked}
    assert by_pid[6].text == (
        "rank 1 (pid 6) wrote an error and is still alive: CUDA error: device-side assert "
        "triggered (case_device_assert.py:6)"
    )
    assert by_pid[6].strength.name == "RAS_BEHIND"
    assert by_pid[5].strength.name == "CONTEXT" and "SeqNum=2, OpType=ALLREDUCE" in by_pid[5].text


def test_one_log_of_several_ranks_is_split_on_torchs_rank_prefix():
    both = read("ddp_unused_rank0.txt") + read("ddp_unused_rank1.txt")
    assert parse_log(both, rank=1).exception.startswith("RuntimeError: Expected")  # type: ignore[union-attr]
    assert parse_log(both, rank=0).exception is None


def test_a_pid_reused_by_another_process_is_not_the_rank():
    import os

    import psutil

    from gputui.collect.procs.rankio import alive

    me = psutil.Process(os.getpid()).create_time()
    assert alive(os.getpid(), me)
    assert not alive(os.getpid(), me - 100.0)  # same number, an earlier process
    assert not alive(4_194_303, None)


def test_an_alive_ranks_old_error_it_recovered_from_is_not_a_finding():
    old = read("xid_device_assert_stderr.txt") + "\n" + "step 12 loss 0.5\n" * 100
    rec = {"ranks": [{"pid": 6, "rank": 1, "gone": False, "seen": True, "tail": old}]}
    assert explain_lastwords(rec, Verdict(t=1.0), None).ranked == ()
