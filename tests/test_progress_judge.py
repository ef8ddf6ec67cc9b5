"""The busy-or-stuck rule (gputui.diagnose.hang.progress), on progress records as the poller writes
them: readings [t, cpu_s, read_bytes, write_bytes, rchar, wchar] and dumps with `moved`.

The hard cases: a rank that burns a core in one place (a busy-wait loop) is not busy; a rank
that polls while sleeping (frames move, no CPU) is not busy; the waiting rank's small
heartbeat bytes are not progress; bytes alone are; CPU with moving frames is.
"""

from __future__ import annotations

from gputui.diagnose.evidence import Evidence
from gputui.diagnose.hang.progress import (
    busy_phase,
    busy_verdict,
    explain_progress,
    judge_rank,
    no_progress,
    past_limit,
)
from gputui.diagnose.ranking import Finding, Strength
from gputui.diagnose.verdict import Verdict

T0 = 1_700_000_000.0


def entry(per_s_cpu=0.0, per_s_write=0, per_s_read=0, seconds=10, dumps=(), pid=815, rank=0):
    """A rank's entry with one reading a second for `seconds` seconds."""
    samples = []
    for i in range(seconds + 1):
        w, r = per_s_write * i, per_s_read * i
        samples.append([T0 + i, 5.0 + per_s_cpu * i, r, w, r + 100 * i, w + 50 * i])
    return {
        "pid": pid,
        "rank": rank,
        "gpu": rank,
        "first": [samples[0]],
        "samples": samples,
        "dumps": list(dumps),
    }


def dump(i, moved, frame="save_checkpoint (train.py:88)", functions=("save_checkpoint",)):
    return {"t": T0 + i, "outcome": "done", "moved": moved, "frame": frame, "functions": functions}


def test_bytes_written_make_a_rank_busy_with_its_rate_and_frame():
    j = judge_rank(entry(per_s_write=82_000_000, dumps=[dump(8, False), dump(10, False)]))
    assert j is not None and j.advancing is True
    assert (
        j.sentence()
        == "rank 0 writes a checkpoint: save_checkpoint (train.py:88), 82 MB/s for 10 s"
    )


def test_reading_is_said_as_reading():
    j = judge_rank(entry(per_s_read=5_000_000))
    assert j is not None and j.advancing and j.what == "reads" and j.rate == "5.0 MB/s"


def test_a_heartbeats_bytes_are_not_progress():
    j = judge_rank(entry(per_s_cpu=0.01))  # rchar/wchar grow 100 and 50 bytes a second
    assert j is not None and j.advancing is False
    assert j.why.startswith("no bytes read or written")


def test_cpu_time_with_frames_that_move_is_busy():
    moving = [
        dump(i, i > 2, f"codegen_kernel_{i} (<k>:3)", (f"codegen_kernel_{i}",))
        for i in (2, 4, 6, 8)
    ]
    j = judge_rank(entry(per_s_cpu=0.95, dumps=moving))
    assert j is not None and j.advancing is True
    assert j.what == "compiles on the CPU" and j.rate == "0.9 CPU cores"


def test_a_busy_wait_loop_burns_a_core_in_one_place_and_is_not_busy():
    still = [
        dump(i, False, "wait_for_flag (train.py:78)", ("wait_for_flag",)) for i in (2, 4, 6, 8)
    ]
    j = judge_rank(entry(per_s_cpu=1.0, dumps=still))
    assert j is not None and j.advancing is False
    assert "busy-wait loop" in j.why


def test_a_long_native_call_under_a_library_frame_is_busy_though_its_stack_stands_still():
    """Seen on 4 x H200: torch.save of a 16 GiB state dict spent its first seconds in one
    native call (the archive's CRC, then one large write): a whole core, no bytes counted
    yet, the Python stack standing in torch's `_save` under the rank's save_checkpoint. It
    was called stalled at +5 s; it is a checkpoint being written."""
    fns = ["_save", "save", "save_checkpoint", "rank_main", "main", "<module>"]
    still = [dump(i, False, "save_checkpoint (rank_worker.py:126)", fns) for i in (2, 4, 6, 8)]
    j = judge_rank(entry(per_s_cpu=1.0, dumps=still))
    assert j is not None and j.advancing is True
    assert j.what == "writes a checkpoint" and j.rate == "1.0 CPU core"
    assert j.sentence().startswith(
        "rank 0 writes a checkpoint: save_checkpoint (rank_worker.py:126)"
    )


def test_a_loop_in_the_ranks_own_code_standing_still_is_not_native_work():
    """The same still stack, but its innermost frame is the rank's own function: a
    busy-wait in Python, stuck."""
    fns = ["wait_for_flag", "rank_main"]
    still = [dump(i, False, "wait_for_flag (train.py:78)", fns) for i in (2, 4, 6, 8)]
    j = judge_rank(entry(per_s_cpu=1.0, dumps=still))
    assert j is not None and j.advancing is False


def test_a_loop_polling_a_library_flag_caught_twice_in_the_flag_is_not_native_work():
    """`while not ev.is_set(): pass` stands in threading's `is_set` about half the time:
    two dumps that both caught it are a spin (seen flaky in CI: it was called busy)."""
    fns = ["Event.is_set", "poll_ready", "main"]  # as py-spy names them
    still = [dump(i, False, "poll_ready (cause_rank.py:65)", fns) for i in (2, 4)]
    j = judge_rank(entry(per_s_cpu=1.0, dumps=still))
    assert j is not None and j.advancing is False
    assert "busy-wait loop" in j.why


def test_frames_that_move_without_cpu_time_are_not_progress():
    polling = [dump(i, True, "poll (train.py:5)", ("poll",)) for i in (2, 4, 6, 8)]
    j = judge_rank(entry(per_s_cpu=0.02, dumps=polling))
    assert j is not None and j.advancing is False


def test_cpu_time_alone_without_stacks_is_not_progress():
    j = judge_rank(entry(per_s_cpu=1.0))
    assert j is not None and j.advancing is False
    assert "CPU time alone is not progress" in j.why


def test_too_few_readings_are_not_judged():
    e = entry(per_s_write=80_000_000, seconds=1)
    e["samples"] = e["samples"][:1]
    j = judge_rank(e)
    assert j is not None and j.advancing is None


def test_damaged_entries_are_skipped():
    assert judge_rank({"pid": "x"}) is None
    j = judge_rank({"pid": 5, "samples": [["a"], [1, 2, 3], None, [T0, True, 0, 0, 0, 0]]})
    assert j is not None and j.advancing is None


def stalled(**kw) -> Verdict:
    base = dict(t=T0 + 10, state="stalled", spinning=(1,), suspects=(0,), suspect_pids=(815,))
    return Verdict(**{**base, **kw})


def progress_evidence(**kw) -> Evidence:
    rec = {"type": "progress", "t": T0 + 10, "job": "j", "ranks": [entry(**kw)]}
    return explain_progress(rec, stalled(), None)


def test_a_stalled_job_whose_suspect_writes_is_busy_and_no_alarm():
    ev = progress_evidence(per_s_write=82_000_000)
    phase = busy_phase(stalled(), [ev], None)
    assert phase is not None
    v = busy_verdict(stalled(), phase, ev.extra)
    assert v.state == "busy" and not v.alarm and v.findings == ()
    assert v.busy == {
        "rank": 0,
        "pid": 815,
        "gpu": 0,
        "what": "writes",
        "rate": "82 MB/s",
        "for_s": 10.0,
        "frame": None,
    }
    assert v.reason == "rank 0 writes, 82 MB/s for 10 s"


def test_a_gone_rank_or_a_mismatch_is_never_busy():
    ev = progress_evidence(per_s_write=82_000_000)
    assert busy_phase(stalled(vanished=(0,)), [ev], None) is None
    mismatch = Evidence(
        "stacks", ranked=(Finding("ranks in different", Strength.MISMATCH, "stacks"),)
    )
    assert busy_phase(stalled(), [ev, mismatch], None) is None
    culprit = Evidence(
        "stacks", ranked=(Finding("rank 0 is in save", Strength.CULPRIT_LINE, "stacks"),)
    )
    assert busy_phase(stalled(), [ev, culprit], None) is not None


def test_a_suspect_that_does_not_advance_is_said_and_plain_for_an_early_call():
    ev = progress_evidence(per_s_cpu=0.0)
    assert busy_phase(stalled(), [ev], None) is None
    assert ev.ranked[0].text.startswith("rank 0 (pid 815) makes no progress")
    assert ev.ranked[0].strength == Strength.CONTEXT
    assert no_progress(ev, (815,)) and not no_progress(ev, (815, 816)) and not no_progress(ev, ())


def test_past_the_limit_the_finding_is_steady_and_the_headline_says_how_long():
    ev = progress_evidence(per_s_write=82_000_000)
    phase = busy_phase(stalled(), [ev], None)
    assert phase is not None
    f = past_limit(phase, 5.0).ranked[0]
    assert f.text == "rank 0 writes past --busy-limit (5 s)"
    assert f.lead == "busy for 10 s, past --busy-limit (5 s): rank 0 writes, 82 MB/s for 10 s"
    assert f.strength == Strength.CULPRIT_LINE


def test_a_writer_waiting_in_the_kernel_for_its_sync_is_still_writing():
    """torch.save, then os.sync(): 12 s of writing at 80 MB/s, then 10 s in state D while
    the kernel's threads flush it; no bytes of its own in the window, still the same phase."""
    e = entry(per_s_write=80_000_000, seconds=12)
    flat = e["samples"][-1]
    e["samples"] = e["samples"] + [[flat[0] + i, *flat[1:6], "D"] for i in range(1, 11)]
    j = judge_rank(e)
    assert j is not None and j.advancing is True and j.what == "writes"
    assert j.rate == "44 MB/s" and j.for_s == 22.0  # 960 MB over the 22 s of the spin
    e["samples"][-1] = [*e["samples"][-1][:6], "S"]  # out of the kernel, and no bytes: stuck
    assert judge_rank(e).advancing is False


def test_a_progress_record_is_checked_for_the_recordings_schema():
    from gputui.collect.procs.progress import check_record

    rec = {"type": "progress", "t": T0, "job": "j", "ranks": [entry(per_s_write=1)]}
    rec["ranks"][0]["dumps"] = [dump(2, False)]
    assert check_record(rec) is None
    rec["ranks"][0]["samples"].append([T0, 1.0, 0, 0, 0, 0, "D"])
    assert check_record(rec) is None
    bad = [{"pid": "1"}], [{"pid": 1, "samples": [[T0, "x", 0, 0, 0, 0]]}], "nope"
    for ranks in bad:
        assert check_record({**rec, "ranks": ranks}) is not None


def test_a_hostile_progress_record_never_raises():
    """A record from a file is untrusted: every field of the wrong type is skipped."""
    import random

    rng = random.Random(32)
    junk = [None, True, 5, -1.5, "x", [], {}, [[]], [None] * 7, ["D"], {"t": "x"}, [T0] * 9]
    v = stalled()
    for _ in range(400):
        e = {k: rng.choice(junk) for k in ("pid", "rank", "gpu", "first", "samples", "dumps")}
        e["pid"] = rng.choice([815, e["pid"]])
        if rng.random() < 0.5:
            e["dumps"] = [{"t": rng.choice(junk), "functions": rng.choice(junk), "moved": True}]
        rec = {"type": "progress", "t": rng.choice(junk), "ranks": rng.choice([[e], e, None])}
        explain_progress(rec, v, None)  # must not raise
        judge_rank(e)


def test_socket_bytes_while_the_main_thread_spins_in_its_own_loop_are_not_progress():
    """Seen on 4 x H200: a rank spinning in its own Python loop read 0.3 MB/s through a
    socket (NCCL's proxy thread receiving what its peers sent) and was called busy. Bytes
    that no storage moved, with a main thread nowhere near I/O, are another thread's."""
    e = entry(per_s_cpu=1.0)
    for i, r in enumerate(e["samples"]):
        r[2], r[4] = 0, 300_000 * i  # read_bytes stay 0, rchar grows 0.3 MB/s
    spin = ("spin_in_own_code", "main", "<module>")
    e["dumps"] = [dump(i, False, "spin_in_own_code (w.py:56)", spin) for i in (2, 6, 10)]
    j = judge_rank(e)
    assert j is not None and j.advancing is False
    # the same socket bytes under a main thread that reads them are progress
    e["dumps"] = [dump(i, False, "recv_batch (w.py:12)", ("recv_batch", "main")) for i in (2, 10)]
    j = judge_rank(e)
    assert j is not None and j.advancing is True and j.what == "reads"
