"""A rank whose command line is not UTF-8 is still dumped, thread by thread.

py-spy 0.4's text dump prints the target's command line first and fails on a byte that is not
UTF-8 ("Failed to convert utf8"), before any thread: the automatic dump lost the culprit's
line. `py_spy_dump` then reads the same process with `--json` and writes its threads as the
text dump does, so every reader of a dump (parse_py_spy, the threads rule) reads them as
usual. Real py-spy against a real process started with b"\\xff" in its argv.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from gputui.tools.attach.dumpall import parse_py_spy
from gputui.tools.attach.pyspy_json import text_lines
from gputui.tools.attach.stacks import py_spy_dump
from gputui.tools.result import Outcome
from gputui.tools.which import find_tool

needs_py_spy = pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")

# Thread `stats` holds the GIL in a regex that never ends (exponential on a line ending in
# "!"); the main thread waits for it. SIGALRM's default action ends the process whatever
# holds the GIL.
RANK = """\
import re, signal, sys, threading
signal.alarm(120)

def parse_record(line):
    print("HOLDING", flush=True)
    return re.match(r"^(\\w+\\s?)+$", line)

t = threading.Thread(target=parse_record, args=("metric_" + "a" * 40 + "!",), name="stats")
t.start()
t.join()
"""


@pytest.fixture
def latin1_rank(tmp_path) -> Iterator[subprocess.Popen[bytes]]:
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    proc = subprocess.Popen(
        [sys.executable, str(script), b"--data=/d\xe9j\xe0/\xff"], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"HOLDING\n"  # bounded by the alarm above
        yield proc
    finally:
        proc.kill()
        proc.wait()


@needs_py_spy
def test_a_rank_whose_argv_is_not_utf8_is_dumped_with_its_gil_holder(latin1_rank):
    shown: list[str] = []
    r = py_spy_dump(latin1_rank.pid, timeout=20, on_line=shown.append)
    assert r.outcome is Outcome.DONE, r.summary()
    assert "not UTF-8" in r.message
    threads = {t.name: t for t in parse_py_spy(r.lines)}
    assert set(threads) == {"MainThread", "stats"}, r.text
    stats = threads["stats"]
    assert stats.status == "active+gil", r.text
    assert [f.function for f in stats.frames[:2]] == ["match", "parse_record"], r.text
    assert (stats.frames[1].file, stats.frames[1].line) == ("rank.py", 6), r.text
    # The main thread waits on its side thread: in join, or still in start when the side
    # thread took the GIL before start's own wait returned (seen under load in CI).
    main = [f.function for f in threads["MainThread"].frames]
    assert {"Thread.join", "Thread.start"} & set(main) and main[-1] == "<module>", r.text
    assert shown[-len(r.lines) :] == list(r.lines)  # the pane shows what the readers read


@needs_py_spy
def test_the_native_dump_of_such_a_rank_has_its_c_frames_too(latin1_rank):
    r = py_spy_dump(latin1_rank.pid, native=True, timeout=30)
    assert r.outcome is Outcome.DONE, r.summary()
    stats = next(t for t in parse_py_spy(r.lines) if t.name == "stats")
    functions = [f.function for f in stats.frames]
    assert "parse_record" in functions, r.text
    assert any(f.line is None for f in stats.frames), r.text  # a C frame: no line number


def test_an_answer_that_is_not_py_spys_json_is_no_dump():
    assert text_lines(1, "") is None
    assert text_lines(1, '[{"pid": 1, "frames": [') is None  # cut short at the time limit
    assert text_lines(1, '{"error": "x"}') is None


def test_a_thread_without_os_id_or_name_is_written_as_py_spy_writes_it():
    raw = (
        '[{"thread_id": 255, "os_thread_id": null, "thread_name": null, "active": true,'
        ' "owns_gil": false, "frames": [{"name": "poll", "short_filename": "t.py", "line": 0}]}]'
    )
    lines = text_lines(7, raw)
    assert lines is not None and lines[-2:] == ["Thread 0XFF (active)", "    poll (t.py)"]
    (t,) = parse_py_spy(lines)
    assert (t.tid, t.status, t.name, t.frames[0].line) == ("0XFF", "active", "", None)
