"""A slow job on the other faces: `snapshot` of a replay (the job line carries every GPU's
wait share and the straggler) and `record` -> replay (the replayed verdicts are the live
ones: same states, stragglers and shares at the same samples)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from conftest import run_cli

from gputui.collect.trace.format import TraceWriter, read_trace
from gputui.diagnose.hang.detector import diagnose_trace

STRAGGLER = Path(__file__).parent / "data" / "h200x4-straggler-4x.jsonl.gz"


def test_snapshot_of_a_replay_puts_the_wait_shares_on_the_job_line():
    r = run_cli("snapshot", "--replay", str(STRAGGLER), "--at", "20")
    assert r.returncode == 0, r.stderr
    job = next(ln for ln in r.stdout.splitlines() if ln.startswith("job "))
    assert "wait GPU 0 0%, GPU 1 100%" in job
    assert "slow: GPU 0 is the straggler; GPUs 1-3 wait for it" in job


def test_snapshot_json_of_a_replay_carries_each_jobs_shares():
    r = run_cli("snapshot", "--replay", str(STRAGGLER), "--at", "20", "--json")
    (wait,) = json.loads(r.stdout)["wait"]
    assert wait["stragglers"] == [0] and wait["wait_share"]["0"] == 0.0 and not wait["alike"]


def test_snapshot_before_enough_history_says_nothing_about_waiting():
    r = run_cli("snapshot", "--replay", str(STRAGGLER), "--at", "8", "--json")
    assert "wait" not in json.loads(r.stdout)


def test_a_recorded_slow_job_replays_to_the_same_verdicts(tmp_path):
    """As `gputui record` writes it (gputui's own format, with the power limit) and read back."""
    live = [
        replace(s, gpus=tuple(replace(g, power_limit_w=700.0) for g in s.gpus))
        for s in read_trace(STRAGGLER)
    ]
    path = tmp_path / "slow.jsonl.gz"
    w = TraceWriter(path, host="h200x4")
    for s in live:
        w.write(s)
    w.close()
    replayed = read_trace(path)
    assert len(replayed) == len(live)
    a, b = diagnose_trace(live), diagnose_trace(replayed)
    assert [(v.state, v.stragglers, v.wait_share) for v in a] == [
        (v.state, v.stragglers, v.wait_share) for v in b
    ]
    assert any(v.state == "slow" and v.stragglers == (0,) for v in b)
    slow = next(v for v in b if v.state == "slow")
    assert slow.slow_why["gpus"]["0"]["power_frac"] > 0.9  # the limit travelled too
