"""What gputui said on a real 4 x H200 node, one rank per GPU, replayed: the same verdicts.

The recordings and what each job did are described in tests/data/h200x4-verdicts.md. Live,
each of these verdicts came within 12 s of the onset, with no key pressed; a replay of the
recording must say the same, since the recording carries every sample and every piece of
evidence the Watcher gathered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.collect.trace.format import read_trace
from gputui.watch.watcher import Watcher

DATA = Path(__file__).parent / "data"


def replay(name: str):
    """Every verdict of a replay of tests/data/NAME, as `check --replay` folds them."""
    w = Watcher(live=False)
    try:
        return [w.update(s) for s in read_trace(DATA / name)]
    finally:
        w.close()


def test_the_2_5x_straggler_is_named_alone_and_never_flaps():
    """The waiting ranks drew 60-62 % of their limit, over the old fixed 60 % cut that named
    rank 1 beside rank 2 on the same kind of node; against their busiest peer they wait."""
    verdicts = replay("h200x4-straggler-2.5x.trace.jsonl.gz")
    slow = [v for v in verdicts if v.state == "slow"]
    assert slow and {v.stragglers for v in slow} == {(2,)}
    first = verdicts.index(slow[0])
    assert all(v.state == "slow" for v in verdicts[first:]), "the slow state broke off"
    assert slow[0].t - verdicts[0].t <= 15.0
    assert "rank 2 (GPU 2) is the straggler; ranks 0, 1, 3 (GPUs 0, 1, 3) wait" in slow[-1].reason


def test_the_host_bound_rank_is_the_straggler():
    verdicts = replay("h200x4-hostbound.trace.jsonl.gz")
    assert {v.stragglers for v in verdicts if v.state == "slow"} == {(3,)}
    assert verdicts[-1].state == "slow"


def test_the_mismatch_names_each_ranks_collective_and_its_own_line():
    """NCCL ranks wait in the same `sync()` helper; the headline names where their paths
    parted (train_step vs broadcast_step) and each rank's collective, from RAS and the
    flight recorder. Never a slow or "wait alike" line before it."""
    verdicts = replay("h200x4-mismatch-fr.trace.jsonl.gz")
    assert verdicts[-1].state == "stalled"
    assert verdicts[-1].reason == (
        "ranks in different collectives: ranks 0,1,2 in all_reduce (multi_worker.py:180), "
        "rank 3 in broadcast (multi_worker.py:186)"
    )
    assert not any(v.state == "slow" or "wait alike" in v.reason for v in verdicts)
    assert any(f.startswith("flight recorder: collective") for f in verdicts[-1].findings)


def test_the_stuck_rank_is_named_with_its_line():
    v = replay("h200x4-stuck.trace.jsonl.gz")[-1]
    assert v.state == "stalled" and v.suspects == (3,) and v.spinning == (0, 1, 2)
    assert (
        v.reason.startswith("rank 3 (pid ")
        and "load_next_batch_stuck (multi_worker.py:" in v.reason
    )
    assert v.culprit_frame.startswith("load_next_batch_stuck")


def test_the_xid_death_replays_to_the_ranks_last_words_and_no_record_is_skipped():
    """Its lastwords record holds an entry with no pid; the shape check once refused the
    whole record for it, and the replay then said only the Xid."""
    from gputui.collect.trace.read import TraceReader

    reader = TraceReader(DATA / "h200x4-xid.trace.jsonl.gz")
    reader.read()
    assert not reader.skipped
    v = replay("h200x4-xid.trace.jsonl.gz")[-1]
    assert v.state == "stalled" and v.suspects == (1,)
    assert v.reason == (
        "rank 1 died: CUDA error: an illegal memory access (rank_worker.py:157) (Xid 31 on GPU 1)"
    )


@pytest.mark.parametrize(
    "name",
    [
        "h200x4-xid.trace.jsonl.gz",
        "h200x4-straggler-2.5x.trace.jsonl.gz",
        "h200x4-hostbound.trace.jsonl.gz",
        "h200x4-mismatch-fr.trace.jsonl.gz",
        "h200x4-stuck.trace.jsonl.gz",
    ],
)
def test_no_nvlink_link_is_named_on_these_healthy_gpus(name):
    """Healthy links count thousands of corrected errors since boot: context, never a finding."""
    for v in replay(name):
        assert not any("NVLink" in f and "/min" in f for f in v.findings)
