"""A real 4-rank torch.distributed job (scripts/device/multi_worker.py, gloo on CPU processes): what
the Watcher's findings and `gputui dump --job` say about it, with real py-spy and real torch
frames. The same worker runs 4 or 8 NCCL ranks in scripts/device/check_multigpu.sh; the 8-rank CPU
figures come from bench/multi_rank.py.

GPU readings are synthetic (tests/synth.py's measured H200 levels), the processes on the GPUs
are the job's real ranks. Covers:
- stuck: rank 3 sleeps in load_next_batch_stuck while ranks 0-2 wait inside all_reduce; the
  findings name rank 3's function and line, and the line where the others entered all_reduce;
  dump --job groups ranks 0-2 and marks rank 3 as the one that differs;
- mismatch: rank 3 entered broadcast while ranks 0-2 entered all_reduce, every GPU spins, so
  NVML names no suspect: the findings say the ranks entered different collectives, with each
  call site; dump --job shows the two groups.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator

import pytest
from conftest import run_cli
from targets.multi_job import WORKER, MultiJob, line_of, watch

from gputui.tools.which import find_tool

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed"),
    pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed"),
]

N, ODD = 4, 3
START_S = 90.0  # 4 ranks importing torch on a busy 2-core box; bounded, not slept


def started(mode: str) -> Iterator[MultiJob]:
    job = MultiJob(N, mode, odd=ODD, lifetime=180)
    try:
        assert job.in_place(START_S), f"ranks not in place: {job.lines}\n{job.stderr_tail()}"
        yield job
    finally:
        job.close()


@pytest.fixture(scope="module")
def stuck() -> Iterator[MultiJob]:
    yield from started("stuck")


@pytest.fixture(scope="module")
def mismatch() -> Iterator[MultiJob]:
    yield from started("mismatch")


def entered(text: str) -> int:
    return line_of(WORKER, text)


def test_the_stuck_rank_is_named_by_its_function_and_the_others_by_their_collective(stuck):
    pids = stuck.pids
    v = watch(pids, ["spin", "spin", "spin", "idle"])
    sleep = entered("time.sleep(min(1.0, left))")
    reduce = entered("job.dist.all_reduce(job.x)")
    assert v.state == "stalled" and v.suspects == (ODD,)
    assert v.culprit_frame == f"load_next_batch_stuck (multi_worker.py:{sleep})"
    assert v.findings[:2] == (
        f"rank 3 (pid {pids[3]}) is in load_next_batch_stuck (multi_worker.py:{sleep})",
        f"ranks 0,1,2 wait in all_reduce (multi_worker.py:{reduce})",
    )
    waiting = v.stacks[0]
    assert waiting["frame"] == f"train_step (multi_worker.py:{reduce})"
    assert any("torch/distributed/" in f for f in waiting["stack"])  # real torch frames


def test_dump_job_groups_the_waiting_ranks_and_marks_the_stuck_one(stuck):
    r = run_cli("dump", "--job", str(stuck.pids[0]), "--json", timeout=90)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert sorted(doc["job"]["pids"]) == sorted(stuck.pids)
    groups = [(g["ranks"], g["odd"], g["stack"][0]) for g in doc["groups"]]
    assert [(ranks, odd) for ranks, odd, _ in groups] == [([0, 1, 2], False), ([3], True)]
    assert groups[0][2].startswith("all_reduce (torch/distributed/")
    assert groups[1][2].startswith("load_next_batch_stuck (multi_worker.py:")


def test_ranks_in_different_collectives_are_the_finding_when_every_gpu_spins(mismatch):
    v = watch(mismatch.pids, ["spin"] * N)
    reduce = entered("job.dist.all_reduce(job.x)")
    bcast = entered("job.dist.broadcast(job.x, src=0)")
    assert v.state == "stalled" and v.suspects == ()
    # The odd rank's call site is the culprit's line, and the mismatch is the headline.
    assert v.culprit_frame == f"broadcast_step (multi_worker.py:{bcast})"
    assert v.findings[0] == (
        f"ranks entered different collectives: ranks 0,1,2 in all_reduce "
        f"(multi_worker.py:{reduce}), rank 3 in broadcast (multi_worker.py:{bcast})"
    )
    assert v.reason == "ranks in different collectives: " + v.findings[0].split(": ", 1)[1]
    assert [s["collective"] for s in v.stacks] == ["all_reduce"] * 3 + ["broadcast"]


def test_dump_job_shows_the_rank_in_broadcast_apart_from_the_ranks_in_all_reduce(mismatch):
    r = run_cli("dump", "--job", str(mismatch.pids[2]), timeout=90)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"^ranks 0,1,2 \(3 processes\)$", out, re.M), out
    assert re.search(r"^rank 3 \(1 process\)  <-- differs$", out, re.M), out
    assert re.search(r"^\s+broadcast_step \(multi_worker\.py:\d+\)$", out, re.M), out
    assert "stands out: rank 3 (1 process)" in out
