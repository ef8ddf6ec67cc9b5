"""`bundle --out` writes safely: never through a symbolic link, never half a bundle; and a
bundle made from a recording holds nothing of the machine that wrote it.

The bundle is written into a new temporary directory beside the target and renamed at the
end. A symbolic link at --out is refused (as `record` refuses one); a disk that fills up
mid-write (a real 64 KiB tmpfs, mounted by the test when it runs as root) leaves nothing
behind and says so in one line with exit 2; so does a name too long for the file system
(issue 34: a traceback), creating nothing. A newline or an escape in --out is echoed
escaped, in the error and in the success line alike.

`bundle --demo` and `bundle --replay` put this machine's kernel log in the bundle (issue 34:
another host's segfaults beside the recorded hang) and would read a log file the recording
names from this machine's disk: a bundle made from a recording holds the recording's
samples, stacks, evidence and verdict, says what it was made from, and nothing of this host
(no kernel log, logs, processes, libraries, topology, tools or settings). A real segfault
shows that a live bundle of this machine would have its kernel line.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli
from hostile_corpus import T0, base_lines, text_of


def _one_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("gputui: ")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def test_a_symlink_to_a_directory_is_refused_and_nothing_is_written_through_it(tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    line = _one_line(run_cli("bundle", "--demo", "--out", str(tmp_path / "link")))
    assert "is a symbolic link" in line
    assert list(real.iterdir()) == []


def test_a_dangling_symlink_is_refused_too(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    assert "is a symbolic link" in _one_line(
        run_cli("bundle", "--demo", "--out", str(tmp_path / "link"))
    )
    assert not (tmp_path / "nowhere").exists()


def test_a_bundle_appears_whole_with_no_temporary_directory_left(tmp_path):
    r = run_cli("bundle", "--demo", "--out", str(tmp_path / "b"))
    assert r.returncode == 1, r.stderr  # the demo's stall: the verdict's code
    assert {p.name for p in tmp_path.iterdir()} == {"b"}
    assert (tmp_path / "b" / "README.txt").is_file()


@pytest.fixture
def small_tmpfs(tmp_path) -> Iterator[Path]:
    """A 64 KiB tmpfs with 48 KiB taken, or a skip with the reason it cannot be mounted."""
    mnt = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        (mnt / "filler").write_bytes(b"\0" * 48 * 1024)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


def test_a_full_disk_leaves_no_partial_bundle_and_says_so(small_tmpfs):
    line = _one_line(run_cli("bundle", "--demo", "--out", str(small_tmpfs / "b")))
    assert "No space left on device" in line and "no bundle was left" in line
    assert {p.name for p in small_tmpfs.iterdir()} == {"filler"}


def test_an_out_too_long_for_the_file_system_is_one_line_and_creates_nothing(tmp_path):
    for out in (tmp_path / ("a" * 300), tmp_path / "d" / ("b" * 300) / "x"):
        line = _one_line(run_cli("bundle", "--demo", "--out", str(out)))
        assert "File name too long" in line and "cannot write the bundle" in line
    long_path = tmp_path.joinpath(*["c" * 200] * 25)  # 5,000 characters of short-enough names
    assert "File name too long" in _one_line(run_cli("bundle", "--demo", "--out", str(long_path)))
    assert list(tmp_path.iterdir()) == []


def test_a_newline_or_an_escape_in_out_is_echoed_escaped(tmp_path):
    hostile = "b\n\x1b]2;TITLE\x07\x1b[2J"
    line = _one_line(run_cli("bundle", "--demo", "--out", str(tmp_path / hostile / ("a" * 300))))
    assert "b\\n\\x1b]2;TITLE\\x07\\x1b[2J" in line
    r = run_cli("bundle", "--demo", "--out", str(tmp_path / hostile))
    assert r.returncode == 1, r.stderr  # the demo's stall: the verdict's code
    assert (tmp_path / hostile / "README.txt").is_file()  # written where it was asked
    first = r.stdout.splitlines()[0]
    assert first.startswith("bundle written to ") and "b\\n\\x1b]2;TITLE\\x07" in first
    assert "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout + r.stderr


def _bundle_text(d: Path) -> dict[str, str]:
    out = {}
    for f in sorted(d.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            out[str(f.relative_to(d))] = (
                gzip.decompress(data) if f.suffix == ".gz" else data
            ).decode("utf-8", "replace")
    return out


@pytest.fixture(scope="module")
def segfault_pid() -> int:
    """A real process of this machine that segfaulted just now (the kernel logs it)."""
    p = subprocess.Popen(
        [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"],
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),
    )
    assert p.wait(timeout=30) < 0
    return p.pid


@pytest.fixture(scope="module")
def recording_naming_a_local_log(tmp_path_factory) -> tuple[Path, str]:
    """A recording whose last-words record names a log file that exists on this machine."""
    d = tmp_path_factory.mktemp("rec")
    secret_log = d / "rank1.err"
    marker = f"this-machines-file-{uuid.uuid4().hex[:8]}"
    secret_log.write_text(f"RuntimeError: {marker}\n")
    lines = base_lines(samples=60, spin=True)
    rec = {
        "type": "lastwords",
        "t": T0 + 7.0,
        "job": "master:127.0.0.1:29500",
        "trigger": "stalled",
        "ranks": [
            {"pid": 816, "rank": 1, "gone": True, "seen": True, "gpus": [1],
             "log": str(secret_log), "tail": "RuntimeError: CUDA error (recorded)\n"},
        ],
    }  # fmt: skip
    path = d / "node-9.jsonl"
    path.write_text(text_of(lines[:60] + [rec] + lines[60:]))
    return path, marker


@pytest.mark.parametrize("source", ["--demo", "--replay"])
def test_a_bundle_made_from_a_recording_holds_nothing_of_this_machine(
    tmp_path, segfault_pid, recording_naming_a_local_log, source
):
    recording, marker = recording_naming_a_local_log
    args = ["--demo"] if source == "--demo" else ["--replay", str(recording)]
    r = run_cli("bundle", *args, "--out", str(tmp_path / "b"))
    assert r.returncode in (0, 1), r.stderr  # the bundled verdict's code
    files = _bundle_text(tmp_path / "b")
    assert not [f for f in files if f.startswith("lastwords/")]
    everything = "\n".join(files.values())
    assert f"[{segfault_pid}]" not in everything and "segfault" not in everything
    assert marker not in everything
    host = json.loads(files["host.json"])
    assert set(host) == {"hostname", "made_from", "written_at", "written_by", "driver",
                         "source", "samples"}  # fmt: skip
    assert host["source"] == "replay" and host["hostname"] != os.uname().nodename
    made_from = "the bundled demo recording" if source == "--demo" else f"the recording {recording}"
    assert host["made_from"] == made_from
    readme = files["README.txt"]
    assert "made from " + made_from in readme and "nothing of the machine" in readme
    assert "trace.jsonl.gz" in files and "verdict.json" in files


def test_control_a_live_bundle_of_this_machine_has_its_kernel_line(tmp_path, segfault_pid):
    r = run_cli("bundle", "--seconds", "0", "--out", str(tmp_path / "b"), timeout=120)
    assert r.returncode in (0, 2), r.stderr  # 2: no NVML on this machine; still written
    kernel = (tmp_path / "b" / "lastwords" / "kernel.txt").read_text()
    if kernel.startswith("# ") and "segfault" not in kernel:
        pytest.skip(f"the kernel log cannot be read here: {kernel.strip()[:120]}")
    assert f"[{segfault_pid}]: segfault" in kernel


def test_pid_with_a_recording_is_refused_in_one_line(tmp_path, recording_naming_a_local_log):
    recording, _ = recording_naming_a_local_log
    for args in (["--demo"], ["--replay", str(recording)]):
        line = _one_line(
            run_cli("bundle", *args, "--pid", str(os.getpid()), "--out", str(tmp_path / "b"))
        )
        assert "--pid" in line and "recording" in line
    assert not (tmp_path / "b").exists()
