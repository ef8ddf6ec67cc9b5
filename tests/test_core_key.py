"""`c` in the dashboard: gdb's backtrace of the core file a crashed rank left.

The rank is gone, so there is no row to select: `c` reads the core that the verdict's last
words found (the same as `gputui dump --core FILE`). The core here is real: a Python child
that segfaults with RLIMIT_CORE raised, in its own directory (skipped where core_pattern pipes
cores to a program); the verdict carries it as the last words' explainer writes it. Without
a core, or with one that is not on this machine (a replay from another node), `c` says so.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from screen import run_to_end, until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from gputui.collect.procs.rankio import core_pattern  # noqa: E402
from gputui.diagnose.verdict import Verdict  # noqa: E402
from gputui.tools.which import find_tool  # noqa: E402
from gputui.ui.app import GputuiApp  # noqa: E402
from gputui.ui.screens.tool_pane import ToolPane  # noqa: E402
from screenshots import window  # noqa: E402

CRASH = "import ctypes; ctypes.string_at(0)\n"


def verdict_with_core(pid: int, core: str) -> Verdict:
    """A stall whose rank 1 died, with the core its last words found
    (gputui.diagnose.gone.explain)."""
    entry = {"rank": 1, "pid": pid, "gone": True, "core": core, "cause": "segfault"}
    return Verdict(t=0.0, state="stalled", evidence={"lastwords": {"ranks": [entry]}})


async def press_c(demo_snaps, verdict: Verdict | None):
    app = GputuiApp(window(demo_snaps, "train", 2.0))
    async with app.run_test(size=(100, 30)) as pilot:
        await run_to_end(app, pilot)
        app.verdict = verdict
        await pilot.press("c")
        pane = app.screen if isinstance(app.screen, ToolPane) else None
        if pane is not None:
            await until(pilot, pane.finished.is_set, timeout=120)
            await pilot.pause()
            return pane, [n.message for n in app._notifications]
        return None, [n.message for n in app._notifications]


@pytest.mark.skipif(
    (core_pattern() or "|").startswith("|"),
    reason="core_pattern pipes cores to a program (systemd-coredump, apport): no core file",
)
@pytest.mark.skipif(find_tool("gdb") is None, reason="gdb is not installed")
async def test_c_shows_gdbs_backtrace_of_the_crashed_ranks_core(demo_snaps, tmp_path):
    def allow_cores() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)

    p = subprocess.run(
        [sys.executable, "-c", CRASH], cwd=tmp_path, preexec_fn=allow_cores,  # noqa: PLW1509
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == -11
    # The child's pid is not known from run(); the core's name carries it where the pattern
    # has %p, else the file is just "core": either way the newest core file in its cwd.
    cores = sorted(tmp_path.glob("core*"), key=lambda f: f.stat().st_mtime)
    if not cores:
        pytest.skip(f"no core file appeared (core_pattern {core_pattern()!r})")
    core = str(cores[-1])
    pane, _ = await press_c(demo_snaps, verdict_with_core(4242, core))
    assert pane is not None and pane.pane_title.startswith("gdb: the core of rank 1 (pid 4242)")
    text = "\n".join(pane.lines)
    assert "SIGSEGV" in text or "signal 11" in text, text[-2000:]
    assert any(ln.lstrip().startswith("#0 ") for ln in pane.lines), text[-2000:]


async def test_c_without_a_core_says_what_a_core_needs(demo_snaps):
    pane, said = await press_c(demo_snaps, Verdict(t=0.0, state="stalled"))
    assert pane is None
    assert any("no rank of the stalled job left a core file" in m for m in said), said


async def test_c_with_a_core_that_is_not_on_this_machine_says_so(demo_snaps):
    pane, said = await press_c(demo_snaps, verdict_with_core(7, "/nonexistent/core.7"))
    assert pane is None
    assert any("/nonexistent/core.7 is not here (this is a replay" in m for m in said), said


def test_only_a_gone_ranks_absolute_core_path_is_taken_whatever_a_recording_holds():
    from types import SimpleNamespace

    from gputui.diagnose.gone.explain import crashed_cores

    junk = [None, {"evidence": None}, {"evidence": {"lastwords": []}},
            {"evidence": {"lastwords": {"ranks": "x"}}},
            {"evidence": {"lastwords": {"ranks": [1, None, {"gone": True, "core": "rel/core",
                                                           "pid": 3}]}}}]  # fmt: skip
    for v in junk:
        assert crashed_cores(SimpleNamespace(**v) if isinstance(v, dict) else v) == []
    alive = {"rank": 0, "pid": 5, "gone": False, "core": "/c/core.5"}
    dead = {"rank": 1, "pid": 6, "gone": True, "core": "/c/core.6"}
    v = Verdict(t=0.0, evidence={"lastwords": {"ranks": [alive, dead]}})
    assert crashed_cores(v) == [(1, 6, "/c/core.6")]
