"""The tools layer against real processes: py-spy, gdb and strace, and what can go wrong."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import psutil
import pytest
from targets.launch import Targets

from gputui.collect.model import ProcessInfo
from gputui.tools.attach import ptrace
from gputui.tools.attach.ptrace import Target
from gputui.tools.attach.stacks import gdb_backtrace, py_spy_dump
from gputui.tools.attach.strace import strace_follow
from gputui.tools.result import Outcome
from gputui.tools.runner import run_tool
from gputui.tools.which import find_tool, missing_message, native_debugger, search_dirs

needs_gdb = pytest.mark.skipif(find_tool("gdb") is None, reason="gdb is not installed")
needs_strace = pytest.mark.skipif(find_tool("strace") is None, reason="strace is not installed")
needs_py_spy = pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")


@pytest.fixture
def targets() -> Iterator[Targets]:
    t = Targets()
    yield t
    t.close()


# What time.sleep looks like natively: clock_nanosleep on Python >= 3.11, select before.
SLEEP_CALLS = ("nanosleep", "time_sleep", "select")


def sleeping_natively(text: str) -> bool:
    return any(s in text for s in SLEEP_CALLS)


def children_named(name: str) -> list[int]:
    out = []
    for c in psutil.Process().children(recursive=True):
        try:
            if c.name() == name and c.status() != psutil.STATUS_ZOMBIE:
                out.append(c.pid)
        except psutil.Error:
            pass
    return out


def not_stopped(pid: int) -> bool:
    return ptrace.state_letter(pid) not in ("T", "t")


def settles_in(pid: int, letters: str, seconds: float = 5.0) -> bool:
    """The process's state is one of `letters` within `seconds`. Right after a tracer detaches
    the target is runnable (R) until the scheduler lets it go back to its wait (S) or its stop
    (T): on a busy machine (the suite runs in parallel) that takes a while."""
    deadline = time.monotonic() + seconds
    while ptrace.state_letter(pid) not in letters:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# ---------------------------------------------------------------- runner


def test_run_tool_streams_every_line_in_order_to_the_callback():
    seen: list[str] = []
    code = "import sys\nfor i in range(5): print(f'line {i}', flush=True)\nsys.exit(0)"
    r = run_tool([sys.executable, "-c", code], timeout=30, on_line=seen.append)
    assert r.outcome is Outcome.DONE and r.exit_code == 0
    assert seen == [f"line {i}" for i in range(5)] == list(r.lines)


def test_run_tool_timeout_kills_the_whole_process_group():
    code = (
        "import subprocess, time\n"
        "c = subprocess.Popen(['sleep', '60'])\n"
        "print(c.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    r = run_tool([sys.executable, "-c", code], timeout=1.0)
    assert r.outcome is Outcome.TIMEOUT
    assert time.monotonic() - start < 5
    grandchild = int(r.lines[0])
    deadline = time.monotonic() + 5
    while not gone(grandchild):  # reparented to init, which reaps it
        assert time.monotonic() < deadline, "the tool's child survived the timeout"
        time.sleep(0.01)


def test_run_tool_cancel_stops_it_promptly():
    cancel = threading.Event()
    r = run_tool(
        [sys.executable, "-c", "import time\nprint('up', flush=True)\ntime.sleep(60)"],
        timeout=60,
        cancel=cancel,
        on_line=lambda _ln: cancel.set(),
    )
    assert r.outcome is Outcome.CANCELLED and r.elapsed_s < 5
    assert r.lines == ("up",)


def test_run_tool_stops_at_the_line_bound():
    r = run_tool(["yes"], timeout=30, max_lines=100)
    assert r.outcome is Outcome.DONE and r.truncated
    assert len(r.lines) == 100


def test_run_tool_reports_a_missing_executable():
    r = run_tool(["/nonexistent/py-spy", "dump"], timeout=5)
    assert r.outcome is Outcome.MISSING


def test_run_tool_reports_a_failing_tool_with_its_last_line():
    r = run_tool([sys.executable, "-c", "raise SystemExit('broken here')"], timeout=30)
    assert r.outcome is Outcome.FAILED and r.exit_code == 1
    assert "broken here" in r.message


# What py-spy 0.4.3 printed for pid 1 with RUST_BACKTRACE=1 in the user's environment.
PY_SPY_PID_1 = """Error: Failed to get process executable name. Check that the process is running.

Caused by:
    0: Permission denied (os error 13)
    1: Permission denied (os error 13)

Stack backtrace:
   0: <E as anyhow::context::ext::StdError>::ext_context
   1: py_spy::python_process_info::PythonProcessInfo::new
   2: py_spy::python_spy::PythonSpy::new
  10: main
"""


def test_run_tool_leaves_out_a_rust_backtrace_and_keeps_the_cause():
    r = run_tool([sys.executable, "-c", f"print({PY_SPY_PID_1!r}); print('after')"], timeout=30)
    text = "\n".join(r.lines)
    assert "Stack backtrace" not in text and "anyhow" not in text and "py_spy::" not in text
    assert r.lines[0].startswith("Error: Failed to get process executable name")
    assert "    0: Permission denied (os error 13)" in r.lines  # "Caused by:" keeps its list
    assert r.lines[-1] == "after"


@needs_py_spy
def test_py_spy_never_shows_its_own_backtrace_whatever_rust_backtrace_says(monkeypatch):
    """A person whose shell sets RUST_BACKTRACE=1 pressed p on a process py-spy cannot read:
    the pane showed py-spy's internal frames above gputui's explanation."""
    monkeypatch.setenv("RUST_BACKTRACE", "1")
    monkeypatch.setenv("RUST_LIB_BACKTRACE", "1")
    sleeper = subprocess.Popen(["sleep", "60"])  # not Python: py-spy fails on it, always
    try:
        r = py_spy_dump(sleeper.pid, timeout=20)
    finally:
        sleeper.kill()
        sleeper.wait()
    text = "\n".join([*r.lines, r.message])
    assert r.outcome is Outcome.FAILED, r
    assert "Failed to find python version" in text, text
    assert "backtrace" not in text.lower() and "anyhow" not in text and "py_spy::" not in text


# ---------------------------------------------------------------- which


def test_find_tool_takes_the_search_path_from_an_argument_or_the_environment(monkeypatch):
    assert find_tool("py-spy", path="/nonexistent") is None
    monkeypatch.setenv("GPUTUI_TOOL_PATH", "/nonexistent")
    assert find_tool("py-spy") is None
    assert find_tool("gdb") is None
    msg = missing_message("py-spy")
    assert "pip install py-spy" in msg and "GPUTUI_TOOL_PATH" in msg


def test_py_spy_is_found_beside_this_python_even_off_path(monkeypatch):
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(beside):
        pytest.skip("py-spy is not installed beside this Python")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert find_tool("py-spy") == beside


def test_cuda_gdb_is_looked_for_in_the_cuda_toolkit_and_used_when_gdb_is_absent(tmp_path):
    assert "/usr/local/cuda/bin" in search_dirs("cuda-gdb")
    fake = tmp_path / "cuda-gdb"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    assert native_debugger(path=str(tmp_path)) == ("cuda-gdb", str(fake))
    assert native_debugger(path="/nonexistent") is None


# ---------------------------------------------------------------- py-spy


@needs_py_spy
def test_py_spy_dump_shows_the_function_the_target_is_blocked_in(targets):
    p = targets.start("loader")
    lines: list[str] = []
    r = py_spy_dump(p.pid, on_line=lines.append)
    assert r.outcome is Outcome.DONE, r.summary()
    assert "wait_for_the_data_loader (blocked.py:" in r.text
    assert lines == list(r.lines)
    assert r.target_state_after and r.target_state_after.startswith(("sleeping", "running"))
    assert settles_in(p.pid, "S"), ptrace.state_letter(p.pid)  # back in its wait, not stopped


@needs_py_spy
def test_py_spy_native_adds_the_c_frames_below_python(targets):
    p = targets.start("loader")
    r = py_spy_dump(p.pid, native=True)
    assert r.outcome is Outcome.DONE, r.summary()
    assert "wait_for_the_data_loader" in r.text
    assert sleeping_natively(r.text)
    assert not_stopped(p.pid)


@needs_py_spy
def test_py_spy_shows_every_named_thread(targets):
    p = targets.start("loader", threads=3)
    r = py_spy_dump(p.pid)
    assert r.ok, r.summary()
    for i in range(3):
        assert f'"worker-{i}"' in r.text
    assert r.text.count("spin_in_worker_thread") == 3


def test_a_process_from_a_recording_is_refused():
    r = py_spy_dump(ProcessInfo(pid=814, create_time=1.0, live=False))
    assert r.outcome is Outcome.REFUSED
    assert r.message == "process 814 is from a recording; it is not running on this machine"


def test_a_recycled_pid_is_never_attached_to(targets):
    p = targets.start("loader")
    ct = psutil.Process(p.pid).create_time()
    r = py_spy_dump(ProcessInfo(pid=p.pid, create_time=ct - 100.0))
    assert r.outcome is Outcome.REFUSED and "another process" in r.message
    assert r.lines == ()  # no tool ran
    ok = py_spy_dump(ProcessInfo(pid=p.pid, create_time=ct), tool_path="/nonexistent")
    assert ok.outcome is Outcome.MISSING  # same create time: it went on to look for py-spy


def test_a_missing_tool_is_reported_with_how_to_install_it(targets):
    p = targets.start("loader")
    r = py_spy_dump(p.pid, tool_path="/nonexistent")
    assert r.outcome is Outcome.MISSING and "pip install py-spy" in r.message
    r = strace_follow(p.pid, tool_path="/nonexistent")
    assert r.outcome is Outcome.MISSING and "apt-get install strace" in r.message
    r = gdb_backtrace(p.pid, tool_path="/nonexistent")
    assert r.outcome is Outcome.MISSING and "gdb" in r.message


def test_an_exited_process_is_reported_gone(targets):
    z = targets.zombie()  # a dead rank its launcher has not reaped
    r = py_spy_dump(z)
    assert r.outcome is Outcome.GONE and "exited" in r.message
    r = py_spy_dump(4_000_000 + os.getpid() % 1000)  # above any pid in use
    assert r.outcome is Outcome.GONE


@needs_py_spy
def test_a_tiny_timeout_is_reported_and_the_target_is_left_running(targets):
    p = targets.start("loader")
    r = py_spy_dump(p.pid, timeout=0.001)
    assert r.outcome is Outcome.TIMEOUT, r.summary()
    assert not_stopped(p.pid)


@needs_py_spy
def test_a_target_stopped_before_the_attach_is_left_as_it_was(targets):
    p = targets.start("loader")
    os.kill(p.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 5
        while ptrace.state_letter(p.pid) != "T":
            assert time.monotonic() < deadline
            time.sleep(0.005)
        r = py_spy_dump(p.pid)
        assert "already stopped" in r.message
        # Someone stopped it on purpose: it is stopped again once the detach is over (a
        # resumed target would go back to its wait, S, and never to T).
        assert settles_in(p.pid, "T"), ptrace.state_letter(p.pid)
    finally:
        os.kill(p.pid, signal.SIGCONT)


def test_a_target_left_stopped_by_a_killed_attach_is_resumed(targets):
    p = targets.start("loader")
    os.kill(p.pid, signal.SIGSTOP)  # what a SIGSTOP left behind by a killed tracer does
    state = ptrace.settle(Target(p.pid), stopped_before=False, killed=True)
    assert state is not None and "resumed with SIGCONT" in state
    assert not_stopped(p.pid)


# ---------------------------------------------------------------- gdb


@needs_gdb
def test_gdb_backtrace_shows_native_frames_of_every_thread(targets):
    p = targets.start("loader", threads=2)
    lines: list[str] = []
    r = gdb_backtrace(p.pid, on_line=lines.append)
    assert r.outcome is Outcome.DONE and r.tool == "gdb", r.summary()
    assert sleeping_natively(r.text)
    assert sum(1 for ln in r.lines if ln.startswith("Thread ") and "LWP" in ln) == 3
    assert any(ln.startswith("#0 ") for ln in r.lines)
    assert lines == list(r.lines)
    assert not_stopped(p.pid)


@needs_gdb
@pytest.mark.parametrize("limit", [0.05, 0.15, 0.3])
def test_gdb_killed_at_its_time_limit_never_leaves_the_target_stopped(targets, limit):
    p = targets.start("loader", threads=2)
    r = gdb_backtrace(p.pid, timeout=limit)
    assert r.outcome in (Outcome.TIMEOUT, Outcome.DONE), r.summary()
    assert not_stopped(p.pid), r.target_state_after
    assert not children_named("gdb")


# ---------------------------------------------------------------- strace


@needs_strace
def test_strace_follows_for_its_time_bound_and_detaches(targets):
    p = targets.start("loader", tick=0.02)
    lines: list[str] = []
    r = strace_follow(p.pid, seconds=0.5, on_line=lines.append)
    assert r.outcome is Outcome.DONE and "followed for" in r.message, r.summary()
    assert sum(sleeping_natively(ln) for ln in lines) >= 3
    assert not_stopped(p.pid)
    assert ptrace.tracer_pid(p.pid) == 0


@needs_strace
def test_strace_stops_at_its_line_bound(targets):
    p = targets.start("loader", tick=0.01)
    r = strace_follow(p.pid, seconds=30, max_lines=5)
    assert r.outcome is Outcome.DONE and r.truncated and len(r.lines) == 5
    assert r.elapsed_s < 10
    assert not_stopped(p.pid)


@needs_strace
def test_strace_cancel_stops_it(targets):
    p = targets.start("loader", tick=0.02)
    cancel = threading.Event()
    r = strace_follow(p.pid, seconds=60, cancel=cancel, on_line=lambda _ln: cancel.set())
    assert r.outcome is Outcome.CANCELLED and r.elapsed_s < 10
    assert not_stopped(p.pid)


@needs_strace
def test_a_process_that_exits_during_strace_is_reported_gone(targets):
    p = targets.start("exit-when-traced")
    r = strace_follow(p.pid, seconds=30)
    assert r.outcome is Outcome.GONE, r.summary()
    assert "exited while strace ran" in r.message
    assert p.wait(timeout=10) == 7


# ---------------------------------------------------------------- permission

_DROP_PTRACE = "import ctypes\nctypes.CDLL(None, use_errno=True).prctl(24, 19, 0, 0, 0)\n"


def _without_cap_sys_ptrace() -> None:
    """preexec_fn: drop CAP_SYS_PTRACE from the bounding set, so the exec'd program (and the
    tools it starts) run as root without it: what a container without SYS_PTRACE is."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(24, 19, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
        os._exit(99)


def _can_drop_cap() -> bool:
    if os.geteuid() != 0:
        return False
    r = subprocess.run(
        ["cat", "/proc/self/status"],
        preexec_fn=_without_cap_sys_ptrace,
        capture_output=True,
        text=True,
    )
    return r.returncode == 0


@pytest.mark.skipif(not _can_drop_cap(), reason="needs root able to drop CAP_SYS_PTRACE")
@pytest.mark.parametrize("tool", ["py_spy_dump", "gdb_backtrace", "strace_follow"])
def test_real_permission_denied_says_what_to_do(targets, tool):
    """A non-dumpable target and no CAP_SYS_PTRACE: the kernel really refuses ptrace."""
    if find_tool({"py_spy_dump": "py-spy", "gdb_backtrace": "gdb"}.get(tool, "strace")) is None:
        pytest.skip(f"{tool}: tool not installed")
    p = targets.start("loader", undumpable=True)
    module = "strace" if tool == "strace_follow" else "stacks"
    code = (
        "import json, sys\n"
        f"from gputui.tools.attach.{module} import {tool}\n"
        f"r = {tool}({p.pid}, **({{'seconds': 2}} if '{tool}' == 'strace_follow' else {{}}))\n"
        "print(json.dumps(r.to_json()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=_without_cap_sys_ptrace,
        capture_output=True,
        text=True,
        timeout=60,
    )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if res["outcome"] == "done":
        pytest.skip("this sandbox lets the attach through: ptrace permissions not enforced")
    assert res["outcome"] == "permission", res
    assert "--cap-add SYS_PTRACE" in res["message"] and "CAP_SYS_PTRACE" in res["message"]
    assert not_stopped(p.pid)


def test_permission_advice_covers_each_cause():
    adv = ptrace.permission_advice
    msg = adv(5, "py-spy", scope=1, has_cap=False, euid=1000, target_uid=1000)
    assert "ptrace_scope=1" in msg and "sysctl kernel.yama.ptrace_scope=0" in msg
    msg = adv(5, "gdb", scope=0, has_cap=False, euid=1000, target_uid=0, target_user="root")
    assert "runs as root" in msg and "sudo" in msg
    msg = adv(5, "gdb", scope=0, has_cap=False, euid=0, target_uid=0)
    assert "--cap-add SYS_PTRACE" in msg
    assert "until reboot" in adv(5, "gdb", scope=3, has_cap=True, euid=0, target_uid=0)
    msg = adv(5, "gdb", scope=None, has_cap=True, euid=0, target_uid=0)
    assert "sudo" in msg and "--cap-add SYS_PTRACE" in msg  # nothing known: every fix


def test_cap_sys_ptrace_is_read_from_capeff_bit_19(tmp_path):
    f = tmp_path / "status"
    f.write_text("Name:\tx\nCapEff:\t000001fffef7ffff\n")
    assert ptrace.has_cap_sys_ptrace(str(f)) is False
    f.write_text("Name:\tx\nCapEff:\t0000000000080000\n")
    assert ptrace.has_cap_sys_ptrace(str(f)) is True
    assert ptrace.ptrace_scope(str(tmp_path / "absent")) is None
    (tmp_path / "scope").write_text("1\n")
    assert ptrace.ptrace_scope(str(tmp_path / "scope")) == 1


# ---------------------------------------------------------------- one tracer at a time


def strace_holding(pid: int, seconds: float) -> subprocess.Popen:
    """strace attached to `pid` (returns once the kernel shows it as the tracer)."""
    tracer = subprocess.Popen(
        ["strace", "-qq", "-o", os.devnull, "-p", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while ptrace.tracer_pid(pid) != tracer.pid:
        assert time.monotonic() < deadline, "strace did not attach"
        time.sleep(0.01)
    threading.Timer(seconds, tracer.terminate).start()
    return tracer


@needs_strace
@needs_py_spy
def test_a_dump_waits_for_another_tracer_to_let_go_then_attaches(targets):
    """Two gputui (a dashboard and a `check`) dumping the same rank at once: seen on the
    device as "ptrace refused: run gputui with sudo", as root. The second now waits."""
    p = targets.start("loader", tick=0.02)
    tracer = strace_holding(p.pid, seconds=0.4)
    r = py_spy_dump(p.pid, timeout=10)
    tracer.wait(timeout=10)
    assert r.outcome is Outcome.DONE, r.summary()
    assert ptrace.tracer_pid(p.pid) == 0


@needs_strace
@needs_py_spy
def test_a_tracer_that_stays_is_named_instead_of_blaming_privileges(targets):
    p = targets.start("loader", tick=0.02)
    tracer = strace_holding(p.pid, seconds=30)
    try:
        r = py_spy_dump(p.pid, timeout=3)
    finally:
        tracer.terminate()
        tracer.wait(timeout=10)
    assert r.outcome is Outcome.PERMISSION
    assert f"is being traced by pid {tracer.pid} (strace)" in r.message
    assert "sudo" not in r.message
