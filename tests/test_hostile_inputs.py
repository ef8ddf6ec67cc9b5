"""Hostile input files: every read is bounded and every failure is one line with exit 2.

The files are made by the tests: `@/dev/zero` as a host list, a 100,000-deep JSON line, a
5,000-digit number, NaN and 1e999, and a recording whose read fails with EIO
(`/proc/PID/mem`). Each runs `gputui` as a real process; peak memory is measured.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO, run_cli

from gputui.collect.capped import loads_bounded, read_capped

HOSTILE_LINES = {
    "deep array": "[" * 100_000 + "]" * 100_000,
    "deep object": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "5000 digits": '{"t": 1, "state": ' + "9" * 5000 + "}",
    "1e999": '{"t": 1e999, "state": "ok"}',
    "NaN": '{"t": NaN, "state": "ok"}',
}


def _one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.mark.parametrize("what", sorted(HOSTILE_LINES))
def test_a_hostile_json_line_is_refused_with_a_reason_never_a_recursion_or_int_error(what):
    with pytest.raises(ValueError) as e:
        loads_bounded(HOSTILE_LINES[what])
    assert "\n" not in str(e.value) and len(str(e.value)) < 200


@pytest.mark.parametrize("what", sorted(HOSTILE_LINES))
def test_merge_skips_a_hostile_line_and_says_so_in_one_line(what, tmp_path):
    f = tmp_path / "node.jsonl"
    f.write_text(HOSTILE_LINES[what] + "\n")
    line = _one_line_error(run_cli("merge", str(f)))
    assert "1 other line(s) skipped" in line


@pytest.mark.parametrize(
    "argv", [["merge", "--expect", "@/dev/zero", "-"], ["fleet", "@/dev/zero"]]
)
def test_a_host_list_of_dev_zero_is_one_line_within_a_small_memory(argv, tmp_path):
    """Before the cap, `merge --expect @/dev/zero` and `fleet @/dev/zero` grew past 10 GB."""
    code = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=60,"
        " stdin=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(r.returncode)\n"
        "sys.stdout.write(r.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, sys.executable, "-m", "gputui", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.splitlines()
    peak_kib, rc, *err = out
    assert rc == "2" and len(err) == 1 and "/dev/zero: larger than 16 MiB" in err[0], out
    assert int(peak_kib) < 200 * 1024  # KiB: the read stops at the cap


def test_read_capped_stops_one_byte_past_the_cap(tmp_path):
    f = tmp_path / "hosts"
    f.write_bytes(b"a\n" * 10)
    assert read_capped(str(f), 20) == b"a\n" * 10
    with pytest.raises(ValueError, match="larger than"):
        read_capped(str(f), 19)
    with pytest.raises(ValueError, match="No such file"):
        read_capped(str(tmp_path / "none"), 19)


def test_a_recording_whose_read_fails_with_eio_is_one_line():
    """`/proc/PID/mem` opens as a regular file and fails the first read with EIO."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        for cmd in ("check", "snapshot", "bundle"):
            argv = [cmd, "--replay", f"/proc/{child.pid}/mem"]
            line = _one_line_error(run_cli(*argv))
            assert "read failed (Input/output error)" in line, line
    finally:
        child.kill()
        child.wait(timeout=10)


def test_good_report_lines_still_merge_beside_hostile_ones(tmp_path):
    good = run_cli("check", "--json", "--demo", "--host", "a").stdout
    assert good.strip()
    f = tmp_path / "a.jsonl"
    f.write_text(HOSTILE_LINES["deep array"] + "\n" + good)
    r = run_cli("merge", str(f))
    assert r.returncode in (0, 1), r.stderr
    assert "skipped 1 line(s)" in r.stderr and "Traceback" not in r.stderr
    assert "gputui merge: 1 host(s)" in r.stdout
