"""Hostile arguments: every numeric option bounded, pids as plain digits up to pid_max.

`1e300` used to crash sleeps and timers, `1_0` and Arabic-Indic digits parsed as pid 10,
`dump 2147483648` and `bundle --pid 2**63` were tracebacks, `--replay ''` ran live, and a
kernel thread was reported as exited. Each case is a real command line; most run in-process
(argument errors end before anything starts), the rest as subprocesses.
"""

from __future__ import annotations

import os
import re

import pytest
from conftest import run_cli
from hostile_harness import run_main

from gputui.collect.source import demo_path
from gputui.commands.common import MAX_SECONDS, pid_max

pytestmark = pytest.mark.hostile

# Every numeric option of every command (the dashboard's are the top-level ones).
NUMERIC_OPTIONS = [
    ([], "--interval"),
    ([], "--speed"),
    ([], "--start"),
    ([], "--stall-after"),
    ([], "--hang-after"),
    (["snapshot"], "--interval"),
    (["snapshot"], "--at"),
    (["snapshot"], "--timeout"),
    (["record", "/nonexistent-dir/x.jsonl"], "--interval"),
    (["record", "/nonexistent-dir/x.jsonl"], "--duration"),
    (["check"], "--interval"),
    (["check"], "--duration"),
    (["check"], "--stall-after"),
    (["check"], "--hang-after"),
    (["dump", "1"], "--timeout"),
    (["bundle"], "--interval"),
    (["bundle"], "--seconds"),
    (["bundle"], "--timeout"),
    (["probe"], "--timeout"),
    (["probe"], "--size"),
    (["probe"], "--cpu"),
]
BAD_NUMBERS = [
    *("1e300", "1e999", "nan", "inf", "-inf", "-1", "1_0", "\u0661\u0660", "", "0x10"),
    "9" * 5000,  # probe --size: an OverflowError traceback (issue 34)
    "9" * 5000 + ".5",
]


@pytest.mark.parametrize(("head", "option"), NUMERIC_OPTIONS, ids=lambda x: " ".join(x) or "app")
def test_a_numeric_option_refuses_what_the_code_cannot_use(head, option):
    for value in BAD_NUMBERS:
        r = run_main([*head, f"{option}={value}"], bound=20)
        assert not r.hung and "Traceback" not in r.err, (value, r.err)
        assert r.rc == 2, (value, r.rc, r.err)
        assert r.err.count("\n") == 1 and option in r.err, (value, r.err)


def test_the_upper_bounds_are_usable(tmp_path):
    """A year is the documented limit: it must run, not crash a timer."""
    year = f"{MAX_SECONDS:.0f}"
    demo = str(demo_path())
    for argv in (
        [
            "check",
            "--replay",
            demo,
            "--stall-after",
            year,
            "--hang-after",
            year,
            "--duration",
            year,
        ],
        ["snapshot", "--replay", demo, "--at", year],
    ):
        r = run_main(argv)
        assert r.rc == 0 and not r.hung, r.err
    assert run_main(["snapshot", "--replay", demo, "--at", str(MAX_SECONDS * 2)]).rc == 2


@pytest.mark.parametrize(
    "text",
    ["1_0", "\u0661\u0660", "\u0967\u0966", "2147483648", "9223372036854775808", "0", "-1", "+5"]
    + [" 5", "5 ", "", "1e3", "0x1f", "5" * 5000],
)
def test_a_pid_is_plain_ascii_digits_up_to_pid_max(text):
    for argv in (["dump", text], ["bundle", "--pid", text]):
        r = run_main(argv, bound=20)
        assert r.rc == 2 and not r.hung, (argv, r.err)
        assert r.err.count("\n") == 1 and r.err.startswith("gputui: "), r.err
        assert len(r.err) < 200


def test_a_pid_above_pid_max_names_the_limit():
    top = pid_max()
    r = run_main(["dump", str(top + 1)])
    assert r.rc == 2 and f"pid_max ({top})" in r.err


def _kernel_thread() -> int | None:
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                rest = f.read().decode("ascii", "replace").rpartition(")")[2].split()
        except OSError:
            continue
        if len(rest) > 6 and int(rest[6]) & 0x00200000:
            return int(name)
    return None


def test_dumping_a_kernel_thread_says_it_has_no_user_space_stack():
    pid = _kernel_thread()
    if pid is None:
        pytest.skip("no kernel thread visible in this PID namespace")
    for extra in ([], ["--gdb"], ["--job"]):
        r = run_cli("dump", str(pid), *extra, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "kernel thread" in r.stderr and "exited" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    "argv",
    [["snapshot"], ["snapshot", "--json"], ["check"], ["check", "--json"], ["bundle"], []],
    ids=lambda a: " ".join(a) or "app",
)
def test_an_empty_replay_name_is_an_error_not_a_live_run(argv, tmp_path):
    extra = ["--out", str(tmp_path / "b")] if argv == ["bundle"] else []
    r = run_main([*argv, "--replay", "", *extra], bound=30)
    assert r.rc == 2 and not r.hung, r.err
    assert r.err == "gputui: --replay: empty file name\n"
    assert not (tmp_path / "b").exists()


def test_the_dashboard_refuses_a_fifo_at_once_instead_of_blaming_nvml(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    r = run_main(["--replay", str(tmp_path / "fifo")], bound=20)
    assert r.rc == 2 and not r.hung
    assert re.fullmatch(r"gputui: \S+/fifo: is a FIFO \(named pipe\).*\n", r.err), r.err


def test_the_issues_argument_examples_as_real_command_lines(tmp_path):
    """Each was a traceback (or a live run) in issue 11: now one line and exit 2."""
    for argv in (
        ["dump", "2147483648"],
        ["bundle", "--pid", str(2**63)],
        ["snapshot", "--timeout", "1e300"],
        ["check", "--interval", "1e300"],
        ["record", str(tmp_path / "f.jsonl"), "--interval", "1e300"],
        ["dump", "1_0"],
        ["snapshot", "--replay", ""],
    ):
        r = run_cli(*argv, timeout=60)
        assert r.returncode == 2, (argv, r.stderr)
        assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, (argv, r.stderr)
        assert r.stdout == ""
    assert not (tmp_path / "f.jsonl").exists()
