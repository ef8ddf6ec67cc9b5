"""`gputui dump` as a user runs it: output, exit status 0/1/2, one-line errors."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from conftest import run_cli
from targets.launch import Targets

from gputui.tools.which import find_tool

needs_py_spy = pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")
needs_gdb = pytest.mark.skipif(find_tool("gdb") is None, reason="gdb is not installed")


@pytest.fixture
def targets() -> Iterator[Targets]:
    t = Targets()
    yield t
    t.close()


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@needs_py_spy
def test_dump_prints_the_stack_and_exits_0(targets):
    p = targets.start("loader")
    r = run_cli("dump", str(p.pid))
    assert r.returncode == 0, r.stderr
    assert "wait_for_the_data_loader (blocked.py:" in r.stdout
    assert r.stderr == ""


@needs_py_spy
def test_dump_json_has_one_result_per_pid(targets):
    a, b = targets.start("loader"), targets.start("allreduce")
    r = run_cli("dump", str(a.pid), str(b.pid), "--json", "--native")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)["results"]
    assert [x["pid"] for x in res] == [a.pid, b.pid]
    assert all(x["outcome"] == "done" and x["tool"] == "py-spy --native" for x in res)
    assert "all_reduce" in "\n".join(res[1]["lines"])


@needs_gdb
def test_dump_gdb_streams_the_native_backtrace(targets):
    p = targets.start("loader")
    r = run_cli("dump", str(p.pid), "--gdb")
    assert r.returncode == 0, r.stderr
    assert "Thread 1 " in r.stdout and "#0 " in r.stdout


@needs_py_spy
def test_some_dumps_failing_exits_1_with_one_line_per_failure(targets):
    p = targets.start("loader")
    z = targets.zombie()
    r = run_cli("dump", str(p.pid), str(z))
    assert r.returncode == 1
    line = one_line(r.stderr)
    assert line.startswith(f"gputui: py-spy pid {z}: gone:")
    assert "wait_for_the_data_loader" in r.stdout  # the one that worked is still shown


def test_a_missing_tool_exits_1_and_says_how_to_install_it(targets):
    p = targets.start("loader")
    r = run_cli("dump", str(p.pid), env={"GPUTUI_TOOL_PATH": "/nonexistent"})
    assert r.returncode == 1
    assert "missing: py-spy not found" in one_line(r.stderr)
    assert "pip install py-spy" in r.stderr
    r = run_cli("dump", str(p.pid), "--gdb", env={"GPUTUI_TOOL_PATH": "/nonexistent"})
    assert r.returncode == 1 and "neither gdb nor cuda-gdb" in one_line(r.stderr)


@pytest.mark.parametrize(
    "args, says",
    [
        (["abc"], "not a process id: 'abc'"),
        (["-5"], "not a process id: '-5'"),
        (["0"], "not a process id: '0'"),
        (["99999999"], "no process with pid 99999999"),
        ([], "give at least one PID"),
        (["--job", "1", "2"], "--job takes exactly one PID (got 2)"),
        (["--native", "--gdb", "1"], "not allowed with argument"),
        (["1", "--timeout", "0"], "must be a positive number"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, says):
    r = run_cli("dump", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert says in one_line(r.stderr)
    assert r.stdout == ""
