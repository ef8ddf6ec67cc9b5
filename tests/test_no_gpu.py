"""A node with no GPU: the dashboard shows what `snapshot` shows, and `check` answers at once.

The dashboard said "Showing the busiest host processes" and listed pid 1, 2, 3 (idle kernel
threads, each "[environment not readable]") while a Python loop at 97% CPU was off screen;
`check` waited its whole duration to say there was nothing to watch.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from conftest import REPO, no_gpu_only
from screen import screen_text, until

from gputui.collect.live import LiveSource
from gputui.ui.app import GputuiApp
from gputui.ui.widgets.process_table import ProcessTable


@pytest.fixture
def busy() -> Iterator[subprocess.Popen]:
    """A real process that spins one CPU, as a forgotten training loop does."""
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield p
    p.kill()
    p.wait(timeout=10)


def first_pids(app: GputuiApp, n: int = 5) -> list[int]:
    return [r.proc.pid for r in app.query_one(ProcessTable).rows if r.proc is not None][:n]


@no_gpu_only
async def test_the_busiest_process_is_on_top_and_kernel_threads_carry_no_noise(busy):
    source = LiveSource(interval=0.5)
    app = GputuiApp(source)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            # Other tests may spin CPUs on this machine too: the loop is among the busiest.
            await until(pilot, lambda: busy.pid in first_pids(app), timeout=20)
            text = screen_text(app)
            assert not any("environment not readable" in line for line in text)
            assert any("try `gputui --demo`: a real NCCL hang" in line for line in text)
            assert app.query_one(ProcessTable).sort_by == "cpu"
    finally:
        source.close()


def _alone() -> list[str]:
    """A command prefix that runs gputui in a PID namespace of its own, so that no rank of
    another test (torch jobs run beside this one) is on its host: with a rank waiting, check
    rightly keeps watching for a rendezvous hang. Empty where namespaces cannot be made."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return []
    probe = ["unshare", "--pid", "--fork", "--mount-proc", "true"]
    ok = subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
    return ["unshare", "--pid", "--fork", "--mount-proc"] if ok else []


@no_gpu_only
def test_check_without_a_gpu_and_without_ranks_says_so_at_once():
    prefix = _alone()
    if not prefix:
        pytest.skip("needs a PID namespace of its own (root, unshare)")
    started = time.monotonic()
    r = subprocess.run(
        [*prefix, sys.executable, "-m", "gputui", "check"],
        capture_output=True, text=True, timeout=30, cwd=REPO,
    )  # fmt: skip
    took = time.monotonic() - started
    assert r.returncode == 0, r.stderr
    assert "no GPUs to watch" in r.stdout
    assert took < 8.0, f"check waited {took:.1f} s with nothing to watch"


@no_gpu_only
async def test_at_80x24_the_verdict_is_whole_the_demo_is_named_once_and_no_key_is_idle():
    """Seen on a fresh clone without a GPU: the verdict cut ("Not F…"), "try gputui --demo"
    twice in four lines, and `j`/`a` offered with no job to act on."""
    source = LiveSource(interval=0.5)
    app = GputuiApp(source)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await asyncio.wait_for(app.first_snapshot.wait(), 30)
            await until(pilot, lambda: app.verdict is not None)
            await pilot.pause()
            text = screen_text(app)
            banner = [ln for ln in text[1:4] if ln.strip()]
            reason = app.verdict.reason.split("; run `gputui --demo`")[0]
            flat = " ".join(ln.strip() for ln in text[1:4])
            assert reason in flat and "…" not in " ".join(banner[:-1]), text[:5]
            assert sum("gputui --demo" in ln for ln in text) == 1, text[:6]
            keys = text[-1]
            assert " j suspect" not in keys and " a all ranks" not in keys, keys
            assert " P probe" not in keys and " q quit" in keys and " / filter" in keys
    finally:
        source.close()
