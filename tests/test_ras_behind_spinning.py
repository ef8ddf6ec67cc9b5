"""Ranks NCCL RAS calls behind while their own GPUs spin entered another collective.

Seen on 4 x H200 (rank 0 in broadcast, ranks 1-3 in all_reduce, at the job's first
collective): RAS's counts differed in Broadcast alone ("ranks 1-3 behind at Broadcast count
0, the other 1 rank 1"), so the first line said "behind" and the collectives were named only
at +20 s by the stacks. Every GPU of the job spun: a rank that waits in a collective of its
own while RAS calls it behind in another is in a different collective, a mismatch, and that
is the first line, early (gputui.watch.mismatch_early asks the explainer the same way).
"""

from __future__ import annotations

from test_ras_judge import q, record, snapshot

from gputui.diagnose.nccl.ras import explain_nccl
from gputui.diagnose.ranking import Strength
from gputui.diagnose.verdict import Verdict

# The real answer of tests/data/ras: rank 1 (pid 908, GPU 1) behind in AllReduce, 812 vs 813.
LOCAL = [{"rank": 0, "pid": 907, "gpu": 0}, {"rank": 1, "pid": 908, "gpu": 1}]


def explain(spinning: tuple[int, ...], suspects: tuple[int, ...], local=LOCAL):
    rec = record(
        ras={"queries": [q("behind-4rank.json", 10.0), q("behind-4rank.json", 13.0)]},
        local=local,
    )
    v = Verdict(t=1000.0, state="stalled", spinning=spinning, suspects=suspects)
    return explain_nccl(rec, v, snapshot(1000.0, ["spin", "spin"]))


def test_a_rank_behind_whose_gpu_spins_is_in_another_collective():
    ev = explain(spinning=(0, 1), suspects=())
    top = ev.ranked[0]
    assert top.strength is Strength.MISMATCH
    assert top.headline.startswith("ranks in different collectives (NCCL RAS): rank 1 never")
    assert "AllReduce #813" in top.headline
    assert ev.extra["mismatch"] is True and ev.extra["mismatch_ranks"] == [1]


def test_a_rank_behind_whose_gpu_is_quiet_stays_behind():
    """Its GPU does not spin: it is outside any collective, the simpler answer."""
    ev = explain(spinning=(0,), suspects=(1,))
    assert ev.ranked[0].strength is Strength.RAS_BEHIND
    assert ev.extra["mismatch"] is False


def test_a_rank_behind_on_another_node_stays_behind():
    """Its GPU cannot be seen from here: nothing says it waits in a collective."""
    ev = explain(spinning=(0, 1), suspects=(), local=LOCAL[:1])
    assert ev.ranked[0].strength is Strength.RAS_BEHIND


def test_a_rank_behind_on_a_gpu_it_shares_with_a_rank_ahead_stays_behind():
    """Two ranks on one GPU (NCCL_HOSTID): the spin may be the other rank's
    (tests/data/h100-shared-gpu-stuck, whose rank 1 sat in its data loader)."""
    shared = [{"rank": 0, "pid": 907, "gpus": [1]}, {"rank": 1, "pid": 908, "gpus": [1]}]
    ev = explain(spinning=(1,), suspects=(), local=shared)
    assert ev.ranked[0].strength is Strength.RAS_BEHIND
