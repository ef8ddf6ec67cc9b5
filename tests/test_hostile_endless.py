"""Blank lines and endless input end `gputui merge` as they end `check --replay`.

Round four of the hostile sweep: `merge` of a 4.7 MB gzip of 1 GiB of newlines read for
397 s before it said "no check lines", and `yes '' | gputui merge -` never ended. The
recording reader refuses a file past 100,000 blank lines; merge's reader now does the same,
and the same for lines that are not check lines at all (`yes x`, `yes '{}'`).
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import threading

import pytest
from conftest import REPO, run_cli

from gputui.collect.report_reader import MAX_BLANK, MAX_SKIPPED


def test_a_gzip_of_newlines_is_refused_after_the_blank_line_limit(tmp_path):
    path = tmp_path / "blank.jsonl.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"\n" * (4 * MAX_BLANK))  # as many blank lines as it takes to pass the limit
    r = run_cli("merge", str(path))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().endswith(f"more than {MAX_BLANK} blank lines"), r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b"\n", "blank lines"),
        (b"x\n", "not `gputui check --json` output"),
        (b"{}\n", "not `gputui check --json` output"),
    ],
    ids=["yes-blank", "yes-x", "yes-braces"],
)
def test_endless_standard_input_ends_with_one_line(line, says):
    """A writer that never stops, as `yes` is: merge must end on its own and say why."""
    p = subprocess.Popen(
        [sys.executable, "-m", "gputui", "merge", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert p.stdin is not None
    stop = threading.Event()

    def feed() -> None:
        block = line * 4096
        try:
            while not stop.is_set():
                p.stdin.write(block)  # type: ignore[union-attr]
        except (BrokenPipeError, ValueError, OSError):
            pass  # merge stopped reading: what the test waits for

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        rc = p.wait(timeout=120)  # generous for a loaded CI box; it takes about a second
    finally:
        stop.set()
        p.kill()
    err = p.stderr.read().decode() if p.stderr else ""
    assert rc == 2, err
    assert says in err and "Traceback" not in err, err
    assert str(MAX_BLANK if line == b"\n" else MAX_SKIPPED) in err
