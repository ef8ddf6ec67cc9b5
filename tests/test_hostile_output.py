"""Text from outside never reaches a terminal raw: escapes are shown escaped, rows stay rows.

Real processes whose command lines carry an OSC title sequence (`ESC ] 0 ; ... BEL`) and a
newline, inspected by `snapshot`, `dump` and `bundle`; host names with escapes through
`merge`; a recording whose stack frames carry escapes through `check --replay`; and the
dashboard on a real pseudo-terminal, whose bytes must not contain the sequence.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator

import pytest
from conftest import REPO, run_cli
from hostile_corpus import corpus, materialize
from hostile_harness import raw_control
from test_fleet import sshd  # noqa: F401 - the real sshd fixture

OSC = "\x1b]0;owned\x07"
ARGV_TAIL = f"x{OSC}y\nz"


@pytest.fixture
def hostile_child() -> Iterator[subprocess.Popen]:
    """A Python process that keeps a CPU busy, its argv[0] (`exec -a`) holding an OSC and a
    newline, so they come first in its command line."""
    code = "print('ready', flush=True)\nwhile True:\n    pass\n"
    p = subprocess.Popen([ARGV_TAIL, "-c", code], executable=sys.executable, stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
    yield p
    p.kill()
    p.wait(timeout=10)


@pytest.fixture(scope="module")
def escaped_frames(tmp_path_factory) -> str:
    (case,) = [c for c in corpus() if c.name == "stall_with_escaped_frames"]
    return materialize([case], tmp_path_factory.mktemp("esc"))[0][1]


def test_snapshot_shows_a_command_line_escaped_on_one_row(hostile_child):
    r = run_cli("snapshot", "--interval", "0.3")
    assert raw_control(r.stdout) is None
    rows = [ln for ln in r.stdout.splitlines() if ln.lstrip().startswith(str(hostile_child.pid))]
    assert rows, r.stdout  # the busy child is among the busiest processes
    assert "x\\x1b]0;owned\\x07y\\nz" in rows[0]  # its newline did not split the row


def test_snapshot_json_keeps_the_command_line_exact(hostile_child):
    r = run_cli("snapshot", "--json", "--interval", "0.3")
    procs = [p for p in json.loads(r.stdout)["processes"] if p["pid"] == hostile_child.pid]
    assert procs and procs[0]["cmdline"][0] == ARGV_TAIL


def test_dump_shows_py_spys_header_escaped(hostile_child):
    r = run_cli("dump", str(hostile_child.pid))
    if r.returncode != 0 and "ptrace" in r.stderr:
        pytest.skip(f"py-spy may not attach here: {r.stderr.strip()}")
    assert f"Process {hostile_child.pid}" in r.stdout
    assert "\\x1b]0;owned\\x07" in r.stdout and raw_control(r.stdout + r.stderr) is None


def test_bundle_stack_files_carry_no_raw_escape(hostile_child, tmp_path):
    out = tmp_path / "b"
    r = run_cli("bundle", "--pid", str(hostile_child.pid), "--out", str(out), "--seconds", "0")
    assert r.returncode in (0, 2), r.stderr
    stacks = sorted((out / "stacks").glob("*.txt"))
    assert stacks
    for f in stacks:
        assert raw_control(f.read_text()) is None, f


def test_check_replay_shows_recorded_frames_escaped(escaped_frames):
    r = run_cli("check", "--replay", escaped_frames)
    assert "step\\x1b]0;owned\\x07" in r.stdout  # the frame is shown, escaped
    assert raw_control(r.stdout + r.stderr) is None


def test_merge_text_escapes_host_names(tmp_path):
    lines = run_cli("check", "--json", "--demo", "--host", f"ev{OSC}il").stdout
    f = tmp_path / "n.jsonl"
    f.write_text(lines)
    r = run_cli("merge", "--expect", "node1", str(f))
    assert "ev\\x1b]0;owned\\x07il" in r.stdout or "ev" not in r.stdout
    assert raw_control(r.stdout + r.stderr) is None


def _read_until(fd: int, needle: bytes, seconds: float) -> bytes:
    data, end = b"", time.monotonic() + seconds
    while needle not in data and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data += os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
    return data


def test_the_dashboard_never_writes_a_command_lines_escape_to_the_terminal(escaped_frames):
    """Textual renders through Rich, which drops control codes: the bytes sent to a real
    pseudo-terminal hold the command line's text but never its OSC sequence."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the dashboard on the pty, replaying the hostile recording
        env = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color"}
        os.execvpe(
            sys.executable, [sys.executable, "-m", "gputui", "--replay", escaped_frames], env
        )
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        data = _read_until(fd, b"owned", 60)
        os.write(fd, b"q")
        data += _read_until(fd, b"\x00never", 5)
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
    assert b"owned" in data  # the command line reached the screen, as text
    assert OSC.encode() not in data and b"\x1b]0;owned" not in data


def test_fleet_shows_a_remotes_escapes_escaped(sshd, tmp_path):  # noqa: F811
    """A remote (here a stand-in for gputui on the far side of a real ssh) that prints an
    OSC sequence: `fleet` prefixes each line with the host and shows the escape."""
    evil = tmp_path / "evil-gputui"
    evil.write_text("#!/bin/sh\nprintf 'x\\033]0;owned\\007y\\n'\n")
    evil.chmod(0o755)
    r = run_cli(
        "fleet",
        "a",
        "--ssh-config",
        str(sshd / "ssh_config"),
        "--remote-gputui",
        str(evil),
        "--timeout",
        "20",
        "--",
        "snapshot",
        timeout=120,
    )
    assert "a: x\\x1b]0;owned\\x07y" in r.stdout, (r.stdout, r.stderr)
    assert raw_control(r.stdout + r.stderr) is None
