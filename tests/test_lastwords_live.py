"""A rank that dies while its peer waits: real processes, real log files, the real Watcher.

Two real Python processes stand in for ranks 0 and 1 of a job (GPU readings are synthetic,
tests/synth.py); rank 1 writes its stderr to a file. The Watcher sees both alive (its rank
I/O tracker remembers where each writes), rank 1 then dies, GPU 0 spins alone, and the
verdict's first finding must say why rank 1 is gone:

- it raised: the exception line and the line of the script it came from are quoted;
- it was killed (SIGKILL): no message, said honestly, with where its output went;
- the tracker keeps a bounded tail of a log that grows, and reads only the last bytes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from synth import with_real_pids
from two_ranks import TwoRanks
from waiting import wait_until

from gputui.collect.procs.rankio import TAIL_MAX, read_tail, stream
from gputui.watch.watcher import Watcher

RANK1 = textwrap.dedent(
    """\
    import sys

    def load_batch():
        raise RuntimeError("Expected to have finished reduction in the prior iteration")

    print("ready", flush=True)
    if sys.stdin.readline().strip() == "raise":
        load_batch()
    """
)


@pytest.fixture
def ranks(tmp_path: Path) -> Iterator[TwoRanks]:
    r = TwoRanks(tmp_path, RANK1)
    yield r
    r.close()


def run_until_gone(ranks: TwoRanks, end_rank1) -> object:
    """Feed the Watcher healthy samples until its tracker knows rank 1, end rank 1, then
    feed samples where GPU 0 spins and GPU 1 has lost its process; the last verdict."""
    w = Watcher(1.0, 60.0, auto_dump=False, host_ranks=False)
    t = 1000.0
    try:
        w.update(with_real_pids(t, ranks.pids, ["compute", "compute"]))
        assert wait_until(lambda: w.rankio is not None and w.rankio.get(ranks.r1.pid))
        end_rank1()
        assert ranks.r1.wait(timeout=20) != 0
        for _ in range(12):
            t += 0.25
            w.update(with_real_pids(t, [ranks.r0.pid, None], ["spin", "gone"]))
        assert w.wait(30), "the gatherers did not finish within their bounds"
        v = w.latest()
        assert v is not None
        return v
    finally:
        w.close()


def test_a_rank_that_raised_into_its_log_file_is_named_with_its_exception_and_line(ranks):
    def raise_it() -> None:
        assert ranks.r1.stdin is not None
        ranks.r1.stdin.write(b"raise\n")
        ranks.r1.stdin.flush()

    v = run_until_gone(ranks, raise_it)
    assert v.state == "stalled" and v.suspects == (1,)
    assert v.findings[0] == (
        f"rank 1 (pid {ranks.r1.pid}) died: RuntimeError: Expected to have finished "
        "reduction in the prior iteration (train.py:4)"
    )
    top = v.ranked[0]
    assert top.strength.name == "RANK_GONE" and top.frame == "train.py:4"
    per_rank = {e["rank"]: e for e in v.evidence["lastwords"]["ranks"]}
    assert per_rank[1]["gone"] and per_rank[1]["log"] == str(ranks.log)
    assert per_rank[1]["last_words"]["exception"].startswith("RuntimeError: Expected")
    assert not per_rank[0]["gone"] and per_rank[0]["cause"] is None


def test_a_rank_killed_without_a_word_is_said_to_have_left_no_message(ranks):
    v = run_until_gone(ranks, lambda: os.kill(ranks.r1.pid, signal.SIGKILL))
    assert v.findings[0] == (
        f"rank 1 (pid {ranks.r1.pid}) exited; no message found in its log "
        f"(stdout is a pipe to python (pid {os.getpid()}), stderr a file ({ranks.log}))"
    )


def test_the_tail_of_a_growing_log_is_bounded_and_read_only_when_it_changed(tmp_path):
    log = tmp_path / "big.log"
    log.write_bytes(b"x" * 100 + b"\n" + b"y" * (TAIL_MAX + 5000) + b"\nlast line\n")
    size, data = read_tail(str(log))
    assert size == log.stat().st_size and len(data) <= TAIL_MAX
    assert data.endswith(b"last line\n")
    assert read_tail(str(log), size) is None  # unchanged: nothing read
    log.write_bytes(b"truncated\n")  # rotated or truncated while followed
    assert read_tail(str(log), size) == (10, b"truncated\n")


def test_where_a_process_writes_is_told_apart(tmp_path):
    me = os.getpid()
    assert stream(me, 999_999).kind == "unknown"
    with open(tmp_path / "f", "w") as f:
        p = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"],
            stdin=subprocess.PIPE,
            stdout=f,
            stderr=subprocess.DEVNULL,
        )
    try:
        assert wait_until(lambda: stream(p.pid, 1).kind == "file")
        assert stream(p.pid, 1).path == str(tmp_path / "f")
        assert stream(p.pid, 2).kind == "null"
        s0 = stream(p.pid, 0)
        assert s0.kind == "pipe" and s0.holder == f"python (pid {me})"
    finally:
        p.kill()
        p.wait(timeout=10)


def test_the_bundle_keeps_each_ranks_log_tail_redacted_and_sanitized(tmp_path):
    """lastwords/pid-N.txt: where the rank writes and its tail, secrets redacted, escape
    codes shown as text; lastwords/kernel.txt: the kernel's lines (or why not readable)."""
    import psutil

    from gputui.collect.model import ProcessInfo, RankInfo
    from gputui.tools.bundle.write import write_bundle

    log = tmp_path / "rank.log"
    code = (
        "import sys; sys.stderr.write('AWS_SECRET_ACCESS_KEY=abcd1234secretvalue\\n"
        "\\x1b]0;pwned\\x07 ValueError: boom'); sys.stderr.flush(); print('ready', flush=True);"
        " sys.stdin.read()"
    )
    with open(log, "wb") as err:
        p = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
        )
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        info = ProcessInfo(
            pid=p.pid, create_time=psutil.Process(p.pid).create_time(), rank=RankInfo(rank=3)
        )
        write_bundle(tmp_path / "b", processes=[info], topo_timeout=5)
    finally:
        p.kill()
        p.wait(timeout=10)
    text = (tmp_path / "b" / "lastwords" / f"pid-{p.pid}.txt").read_text()
    assert f"# pid {p.pid}, rank 3" in text and f"# stderr: a file ({log})" in text
    assert "AWS_SECRET_ACCESS_KEY=<redacted>" in text and "abcd1234secretvalue" not in text
    assert "\x1b" not in text and "\\x1b]0;pwned\\x07 ValueError: boom" in text
    assert (tmp_path / "b" / "lastwords" / "kernel.txt").exists()


def test_a_rank_that_dies_after_the_stall_began_is_read_again_when_it_goes(ranks):
    """At the stall rank 1 is alive and idle (nothing in its log); it dies later, still in
    the same stall: its last words are read again then, without waiting for 'hung'."""
    w = Watcher(1.0, 60.0, auto_dump=False, host_ranks=False)
    t = 1000.0
    try:
        w.update(with_real_pids(t, ranks.pids, ["compute", "compute"]))
        assert wait_until(lambda: w.rankio is not None and w.rankio.get(ranks.r1.pid))
        for _ in range(8):
            t += 0.25
            w.update(with_real_pids(t, ranks.pids, ["spin", "idle"]))
        assert w.wait(30) and w.transitions == 1
        assert not any("died" in f for f in w.latest().findings)  # type: ignore[union-attr]
        assert ranks.r1.stdin is not None
        ranks.r1.stdin.write(b"raise\n")
        ranks.r1.stdin.flush()
        assert ranks.r1.wait(timeout=20) != 0
        for _ in range(4):
            t += 0.25
            w.update(with_real_pids(t, [ranks.r0.pid, None], ["spin", "gone"]))
        assert w.wait(30)
        v = w.latest()
    finally:
        w.close()
    assert v is not None and w.transitions == 1
    assert v.findings[0].startswith(f"rank 1 (pid {ranks.r1.pid}) died: RuntimeError: Expected")


def test_a_log_that_is_a_fifo_or_a_device_is_never_read(tmp_path):
    """Reading could block forever (a fifo with no writer) or never end (/dev/zero)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_tail(str(fifo)) is None
    assert read_tail("/dev/zero") is None
    assert read_tail(str(tmp_path / "missing")) is None
    sparse = tmp_path / "sparse.log"
    with open(sparse, "wb") as f:
        f.truncate(1 << 40)  # 1 TiB of holes: only the last 64 KiB are read
        f.seek(0, os.SEEK_END)
        f.write(b"\nRuntimeError: at the end\n")
    size, data = read_tail(str(sparse))
    assert len(data) <= TAIL_MAX and data.endswith(b"RuntimeError: at the end\n")
