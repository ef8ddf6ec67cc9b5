"""An unwritable standard output is one line on stderr and exit 2, for every subcommand.

Three ways stdout cannot be written: closed (`>&-`: Python then has no sys.stdout at all),
full (`>/dev/full`: ENOSPC) and read-only (`1</dev/null`: EBADF). Every subcommand's
`--help`, and the commands that print real output, are run as real processes each way.
A broken pipe (`| head -1`) stays quiet with exit 0.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

from gputui.cli import COMMANDS

WAYS = ("closed", "full", "read-only")
OUTPUTS = [
    ("--version",),
    ("snapshot", "--demo"),
    ("snapshot", "--demo", "--json"),
    ("check", "--demo"),
    ("check", "--demo", "--json"),
]


def run_with_stdout(way: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "gputui", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if way == "closed":
        return subprocess.run(
            ["bash", "-c", 'exec "$@" >&-', "gputui", *cmd],
            cwd=REPO,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    mode = "wb" if way == "full" else "rb"
    target = "/dev/full" if way == "full" else os.devnull
    with open(target, mode) as out:
        return subprocess.run(
            cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.PIPE, text=True, timeout=120
        )


def assert_one_line(r: subprocess.CompletedProcess, way: str) -> None:
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, (way, r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("gputui: cannot write to standard output"), r.stderr


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_subcommands_help_on_an_unwritable_stdout_is_one_line(command, way):
    assert_one_line(run_with_stdout(way, command, "--help"), way)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("args", OUTPUTS, ids=" ".join)
def test_real_output_on_an_unwritable_stdout_is_one_line(args, way):
    assert_one_line(run_with_stdout(way, *args), way)


def test_a_reader_that_stops_early_is_quiet():
    r = subprocess.run(
        [
            "bash",
            "-c",
            f'"{sys.executable}" -m gputui snapshot --demo | head -1; '
            'echo "rc=${PIPESTATUS[0]}" >&2',
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    # quiet (no traceback, no BrokenPipe), and the demo's hang keeps its exit code 1:
    # a reader that stops early must not turn a hang into a 0
    assert r.stderr.strip() == "rc=1", r.stderr
    assert r.stdout.startswith("verdict: STALLED")  # the first line of snapshot --demo


@pytest.mark.parametrize("way", WAYS)
def test_merge_and_bundle_output_on_an_unwritable_stdout_is_one_line(way, tmp_path):
    report = tmp_path / "a.jsonl"
    with open(os.devnull, "rb") as nothing:
        lines = subprocess.run(
            [sys.executable, "-m", "gputui", "check", "--json", "--demo", "--host", "a"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=nothing,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    report.write_text(lines)
    assert_one_line(run_with_stdout(way, "merge", str(report)), way)
    assert_one_line(run_with_stdout(way, "bundle", "--demo", "--out", str(tmp_path / "b")), way)
