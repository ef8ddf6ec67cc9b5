"""`dump` as root names the real reason ptrace was refused, never "run gputui with sudo".

Root with CAP_SYS_PTRACE was told to use sudo. The reasons that hold for root are read from
/proc: the target's namespaces (another container or sandbox), a seccomp filter or security
module on gputui, capabilities the target holds and gputui lacks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import run_cli

from gputui.tools.attach import ptrace
from gputui.tools.attach.ptrace_why import root_refusal_reasons


def test_a_process_in_another_user_namespace_is_named_as_such():
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    child = subprocess.Popen(["unshare", "--user", "--map-root-user", "sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{child.pid}/exe").endswith("unshare"):
            assert time.monotonic() < deadline, "unshare did not exec sleep"
            time.sleep(0.02)
        if os.readlink(f"/proc/{child.pid}/ns/user") == os.readlink("/proc/self/ns/user"):
            pytest.skip("this kernel did not give the child a user namespace")
        reasons = root_refusal_reasons(child.pid)
        assert "is in another user namespace" in reasons[0]
        assert "inside the job's container" in reasons[0]
    finally:
        child.kill()
        child.wait(timeout=10)


def test_a_child_in_gputuis_own_namespaces_leaves_a_security_module_or_the_sandbox():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        reasons = root_refusal_reasons(child.pid)
        assert not any("namespace" in r for r in reasons)
        assert all("sudo" not in r for r in reasons)
    finally:
        child.kill()
        child.wait(timeout=10)


@pytest.mark.skipif(os.geteuid() != 0, reason="checks what root is told")
def test_dump_as_root_with_cap_sys_ptrace_never_says_sudo():
    if not ptrace.has_cap_sys_ptrace():
        pytest.skip("this root has no CAP_SYS_PTRACE")
    r = run_cli("dump", "1", timeout=60)
    if r.returncode == 0 or "permission" not in r.stderr:
        pytest.skip("process 1 can be attached to here: nothing was refused")
    line = r.stderr.strip()
    assert "sudo" not in line and "ptrace refused" in line


def test_two_of_our_tools_never_hold_one_pid_at_once():
    """The progress poller's py-spy and the stacks gatherer's must not attach one rank
    together: each would read the other's tracing stop as the owner's (CI: a rank stopped
    on purpose was resumed). The second waits, at most its bound, for the first."""
    import threading

    from gputui.tools.attach.ptrace import one_tool_at_a_time

    holding, done = threading.Event(), threading.Event()

    def first() -> None:
        with one_tool_at_a_time(424242, 1.0) as got:
            assert got
            holding.set()
            done.wait(30)

    t = threading.Thread(target=first)
    t.start()
    assert holding.wait(30)
    with one_tool_at_a_time(424242, 0.05) as got:
        assert not got  # bounded: it runs anyway, as an attach did before
    with one_tool_at_a_time(424243, 0.05) as got:
        assert got  # another pid is free
    done.set()
    t.join(30)
    with one_tool_at_a_time(424242, 1.0) as got:
        assert got
