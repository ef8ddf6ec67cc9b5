"""The detector against values that come from input: rank variables are bounded, and
nothing walks a range whose length a process's environment (or a recording) chose.

`LOCAL_WORLD_SIZE=1000000000000` made `check` run for ever and the dashboard spin at
100% CPU: the missing-rank inference looped over range() of it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from synth import timeline

from gputui.collect.procs.jobs import MAX_RANKS, group_jobs, rank_from_env
from gputui.diagnose.hang.detector import diagnose_trace
from gputui.diagnose.job_groups import GroupMemory

pytestmark = pytest.mark.hostile


@pytest.mark.parametrize(
    "text, value",
    [
        ("3", 3),
        ("007", 7),
        (str(MAX_RANKS), MAX_RANKS),
        (str(MAX_RANKS + 1), None),
        ("1000000000000", None),
        ("9" * 5000, None),
        ("1_0", None),
        (" 5", None),
        ("-1", None),
        ("\u0661\u0660", None),  # Arabic-Indic digits
        ("", None),
    ],
)
def test_a_rank_variable_is_plain_digits_up_to_max_ranks(text, value):
    r = rank_from_env({"LOCAL_WORLD_SIZE": text, "RANK": text})
    assert r is not None and r.local_world_size == value and r.rank == value


def _with_local_world(snaps, size: int):
    """The samples with every process's LOCAL_WORLD_SIZE set to `size`."""
    for s in snaps:
        procs = tuple(
            replace(p, rank=replace(p.rank, local_world_size=size)) if p.rank else p
            for p in s.processes
        )
        yield replace(s, processes=procs, jobs=group_jobs(procs))


def test_missing_local_ranks_are_looked_for_only_on_this_nodes_gpus():
    # Ranks 0 and 1 run on GPUs 0 and 1 of a 4-GPU node; the job says it has 2**20 local
    # ranks. Only GPUs 2 and 3 can hold a missing local rank: two inferred members, not a
    # million (and no walk over a million).
    snap = next(
        _with_local_world(
            timeline((0.25, ["spin", "idle", "free", "free"]), local=True, jobs=[[0, 1]]), MAX_RANKS
        )
    )
    (group,) = GroupMemory().update(snap)
    inferred = sorted(i for i, m in group.members.items() if m.missing_rank is not None)
    assert inferred == [2, 3]
    assert len(group.members) == 4


def test_a_trillion_local_ranks_reads_as_unknown_and_the_hang_is_still_found():
    snaps = list(timeline((12, ["spin", "idle"]), local=True))
    procs = tuple(
        replace(p, rank=rank_from_env({"RANK": str(p.rank.rank), "LOCAL_RANK": str(p.rank.rank),
                                       "LOCAL_WORLD_SIZE": "1000000000000",
                                       "MASTER_ADDR": "h", "MASTER_PORT": "29500"}))
        for p in snaps[0].processes
    )  # fmt: skip
    hostile = [replace(s, processes=procs, jobs=group_jobs(procs)) for s in snaps]
    v = diagnose_trace(hostile)[-1]
    assert v.state == "stalled" and v.spinning == (0,) and v.suspects == (1,)
