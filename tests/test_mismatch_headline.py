"""Ranks in different collectives, end to end: the headline of `check --json` and of the
80x24 dashboard, with no key pressed.

What is real: a 2-rank torch.distributed job on gloo (scripts/device/multi_worker.py `mismatch`:
rank 0 waits in all_reduce, rank 1 in broadcast, for good), py-spy, and gputui run as a
person runs it, against the stand-in libnvidia-ml.so.1 (tests/nvml_standin/) in `spin`
mode with GPUTUI_STANDIN_PIDS naming the two ranks: both "GPUs" spin, so NVML alone names
no suspect, and only the ranks' stacks can say what is wrong.

Covers: `check --json` turns the mismatch into its `reason` (both collectives and their
lines), sets `culprit_frame`, ranks the mismatch first in `ranked`, gives the call sites as
the first next step and no "dump every rank" any more, within 15 s of the spin's start with
the default --stall-after (10 s), and exits 1; at 80x24 the whole headline is on the screen,
wrapped, without pressing anything.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from nvml_standin.build import REPO, build_standin, standin_env
from targets.multi_job import WORKER, MultiJob, line_of
from tmux import Tmux, needs_tmux

from gputui.tools.which import find_tool

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed"),
    pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed"),
]

HEADLINE_WITHIN_S = 15.0


@pytest.fixture(scope="module")
def job() -> Iterator[MultiJob]:
    j = MultiJob(2, "mismatch", odd=1, lifetime=180)
    try:
        assert j.in_place(90), f"ranks not in place: {j.lines}\n{j.stderr_tail()}"
        yield j
    finally:
        j.close()


def spinning_env(job: MultiJob) -> dict[str, str]:
    env = standin_env(build_standin(), "spin")
    env["GPUTUI_STANDIN_PIDS"] = ",".join(map(str, job.pids))
    env["PYTHONPATH"] = str(REPO)
    return env


def sites() -> tuple[str, str]:
    reduce = line_of(WORKER, "job.dist.all_reduce(job.x)")
    bcast = line_of(WORKER, "job.dist.broadcast(job.x, src=0)")
    return (
        f"rank 0 in all_reduce (multi_worker.py:{reduce})",
        f"rank 1 in broadcast (multi_worker.py:{bcast})",
    )


def test_check_json_makes_the_mismatch_its_reason_within_15_s(job):
    argv = [sys.executable, "-m", "gputui", "check", "--json", "--duration", "16"]
    r = subprocess.run(argv, env=spinning_env(job), capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    reduce, bcast = sites()
    want = f"ranks in different collectives: {reduce}, {bcast}"
    hit = next((x for x in lines if x["reason"] == want), None)
    assert hit is not None, [x["reason"] for x in lines]
    took = hit["t"] - lines[0]["t"]
    print(f"mismatch headline {took:.1f} s after the first sample")
    assert took <= HEADLINE_WITHIN_S
    assert hit["state"] == "stalled" and hit["suspects"] == []
    assert hit["culprit_frame"].startswith("broadcast_step (multi_worker.py:")
    assert hit["ranked"][0]["strength"] == "mismatch" and hit["ranked"][0]["ranks"] == [1]
    assert "nvml" in [f["strength"] for f in hit["ranked"]]  # the NVML picture, below it
    steps = " ".join(hit["next_steps"])
    assert hit["next_steps"][0].startswith(f"The ranks called different collectives ({reduce}")
    assert "Dump every rank" not in steps and "--job" not in steps  # the dump is in


@needs_tmux
def test_the_80x24_dashboard_shows_both_collectives_with_no_key(job):
    reduce, bcast = sites()
    tmux = Tmux(80, 24)
    env = spinning_env(job)
    keep = ("LD_LIBRARY_PATH", "GPUTUI_STANDIN_NVML", "GPUTUI_STANDIN_PIDS", "PYTHONPATH")
    try:
        tmux.start(
            [sys.executable, "-m", "gputui", "--stall-after", "2"], {k: env[k] for k in keep}
        )
        screen = tmux.wait(
            lambda s: "all_reduce" in s and "broadcast" in s and "STALLED" in s,
            "the mismatch in the banner",
            timeout=60,
        )
    finally:
        tmux.close()
    flat = " ".join(ln.strip() for ln in screen.splitlines())
    assert f"▶ ranks in different collectives: {reduce}, {bcast}" in flat, screen
    assert "…" not in "".join(ln for ln in screen.splitlines() if "collectives" in ln)
    assert "the ranks disagree" in screen  # not "no suspect": the first line agrees
