"""A rank that segfaults with a core file in its cwd: the Watcher says how it died and where
the core is, and `gputui dump --core` gives gdb's backtrace of it. Real processes, a real
core (RLIMIT_CORE raised in the child); skipped where the kernel's core_pattern sends cores
elsewhere."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from synth import with_real_pids
from waiting import wait_until

from gputui.collect.procs.rankio import core_pattern
from gputui.tools.attach.core import find_core
from gputui.tools.which import find_tool
from gputui.watch.watcher import Watcher

CRASH = (
    "import ctypes, sys\nprint('ready', flush=True)\nsys.stdin.readline()\nctypes.string_at(0)\n"
)

pytestmark = [
    pytest.mark.skipif(
        (core_pattern() or "|").startswith("|"),
        reason="core_pattern pipes cores to a program (systemd-coredump, apport): no core file",
    ),
    pytest.mark.skipif(find_tool("gdb") is None, reason="gdb is not installed"),
]


def allow_cores() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def test_a_rank_that_segfaults_is_named_with_its_core_and_dump_core_reads_it(tmp_path: Path):
    waiter = subprocess.Popen(
        [sys.executable, "-c", "print('ready', flush=True); import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    crasher = subprocess.Popen(
        [sys.executable, "-c", CRASH],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        preexec_fn=allow_cores,  # noqa: PLW1509 - sets one rlimit, no threads involved
    )
    w = Watcher(1.0, 60.0, auto_dump=False, host_ranks=False)
    try:
        for p in (waiter, crasher):
            assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        pids = [waiter.pid, crasher.pid]
        t = 1000.0
        w.update(with_real_pids(t, pids, ["compute", "compute"]))
        assert wait_until(lambda: w.rankio is not None and w.rankio.get(crasher.pid))
        assert w.rankio is not None and w.rankio.get(crasher.pid).core_limit == "unlimited"
        assert crasher.stdin is not None
        crasher.stdin.write(b"go\n")
        crasher.stdin.flush()
        assert crasher.wait(timeout=60) == -11
        core = find_core(crasher.pid, str(tmp_path), core_pattern())
        if core is None:
            pytest.skip(f"no core file appeared in {tmp_path} (core_pattern {core_pattern()!r})")
        for _ in range(12):
            t += 0.25
            w.update(with_real_pids(t, [waiter.pid, None], ["spin", "gone"]))
        assert w.wait(30)
        v = w.latest()
    finally:
        w.close()
        for p in (waiter, crasher):
            p.kill()
            p.wait(timeout=10)
    assert v is not None
    top = v.findings[0]
    assert top.startswith(f"rank 1 (pid {crasher.pid}) ")
    assert top.endswith(f"; core: gputui dump --core {core}")
    if not v.evidence["lastwords"].get("kernel_error"):  # the kernel log was readable
        assert f"rank 1 (pid {crasher.pid}) died: segfault in libc" in top

    r = run_cli("dump", "--core", core, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "SIGSEGV" in r.stdout and "#0 " in r.stdout


def test_dump_core_bad_input_is_one_line(tmp_path: Path):
    r = run_cli("dump", "--core", str(tmp_path / "nope"))
    assert (
        r.returncode == 2
        and r.stderr.strip() == f"gputui: --core {tmp_path / 'nope'}: no such file"
    )
    junk = tmp_path / "core"
    junk.write_bytes(b"\x7fELF not really a core")
    r = run_cli("dump", "--core", str(junk), timeout=120)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr
    r = run_cli("dump", "--core", str(junk), "123")
    assert r.returncode == 2 and "Traceback" not in r.stderr
