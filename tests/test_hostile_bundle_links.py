"""A bundle is never written through a link, and a SIGTERM leaves no half of one.

Round four of the hostile sweep, as root: `bundle --out D/b` where another user can write to
D let that user swap the partial directory for one of links (a root file overwritten with
processes.json, 6 tries of 6); `--out /tmp/link_to_etc/x` created `/etc/x` through the parent
link; and a SIGTERM while the stacks were taken left the hidden `.b.partial-*` directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from gputui.errors import GputuiError
from gputui.tools.bundle.write import write_bundle


def test_a_link_among_the_parents_of_out_is_refused_and_nothing_is_made_through_it(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (tmp_path / "link_to_etc").symlink_to(etc)
    r = run_cli("bundle", "--demo", "--out", str(tmp_path / "link_to_etc" / "x"))
    assert r.returncode == 2, r.stderr
    assert "link_to_etc: is a symbolic link" in r.stderr and "Traceback" not in r.stderr
    assert list(etc.iterdir()) == []


def test_a_link_deeper_in_a_path_still_to_be_made_is_refused_too(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b").symlink_to(tmp_path / "elsewhere")
    r = run_cli("bundle", "--demo", "--out", str(tmp_path / "a" / "b" / "c" / "d"))
    assert r.returncode == 2 and "is a symbolic link" in r.stderr, r.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_a_partial_directory_swapped_for_links_writes_nothing_through_them(tmp_path, demo_snaps):
    """The attacker's move, made from inside the write: the partial directory renamed away
    and one of links to a root file put in its place, under the same name."""
    shared = tmp_path / "shared"
    shared.mkdir()
    victim = tmp_path / "root-file"
    victim.write_text("root's own\n")
    swapped: list[Path] = []

    def swap(_line: str) -> None:
        if swapped:
            return
        (partial,) = shared.glob(".b.partial-*")
        partial.rename(shared / "moved")
        partial.mkdir()
        for name in (
            "processes.json",
            "verdict.json",
            "README.txt",
            "host.json",
            "health.json",
            "trace.jsonl.gz",
            "topology.txt",
        ):
            (partial / name).symlink_to(victim)
        swapped.append(partial)

    with pytest.raises(GputuiError, match="swapped while the bundle was written"):
        write_bundle(shared / "b", snapshots=demo_snaps[-20:], processes=[], on_line=swap)
    assert swapped, "the write never said a line: the swap was not tried"
    assert victim.read_text() == "root's own\n"
    assert (shared / "moved" / "README.txt").is_file()  # what gputui wrote went to its own


@pytest.fixture
def slow_py_spy(tmp_path):
    """A py-spy that says it started (a file) and then takes a minute: a window in which the
    bundle is half written, for the signal."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "py-spy"
    tool.write_text('#!/bin/sh\ntouch "$GPUTUI_TEST_MARK"\nexec sleep 60\n')
    tool.chmod(0o755)
    return bin_dir


def test_sigterm_while_the_stacks_are_taken_leaves_no_partial_directory(tmp_path, slow_py_spy):
    out_dir = tmp_path / "D"
    out_dir.mkdir()
    mark = tmp_path / "py-spy-started"
    target = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    env = {**os.environ, "GPUTUI_TOOL_PATH": str(slow_py_spy), "GPUTUI_TEST_MARK": str(mark)}
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputui",
            "bundle",
            "--pid",
            str(target.pid),
            "--out",
            str(out_dir / "b"),
            "--timeout",
            "120",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # polling for the tool's start (a condition), bounded
        assert mark.exists(), p.communicate(timeout=10)
        assert [x.name for x in out_dir.iterdir()][0].startswith(".b.partial-")
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
    finally:
        p.kill()
        target.kill()
        target.wait(10)
    assert rc == 128 + signal.SIGTERM, p.stderr.read() if p.stderr else ""
    assert list(out_dir.iterdir()) == []
