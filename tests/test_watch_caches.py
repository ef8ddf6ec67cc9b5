"""What the per-sample caches of the detector's side reuse, and that they let go of it.

A replay hands back the very same objects (jobs tuple, pid tuples, RankInfo) for samples
whose processes did not change, so GroupMemory, NodeReport and health_key reuse what they
worked out at the last sample. Live snapshots are new objects every sample: equal inputs
must still be reused, and any change must be seen at the sample it comes.
"""

from __future__ import annotations

from dataclasses import replace

from synth import snapshot

from gputui.collect.model import Snapshot
from gputui.collect.procs.jobs import group_jobs
from gputui.diagnose.health.judge import HealthTracker
from gputui.diagnose.health.report import health_key
from gputui.diagnose.job_groups import GroupMemory
from gputui.diagnose.merge.node_report import NodeReport
from gputui.diagnose.verdict import Verdict


def _with_ranks(s: Snapshot, t: float, ranks: dict[int, int], same_jobs: bool) -> Snapshot:
    """`s` at time `t` with process pid -> its new global rank; the jobs tuple kept as it is
    when `same_jobs` (as the reader does when the processes are the same)."""
    procs = tuple(
        replace(p, rank=replace(p.rank, rank=ranks[p.pid])) if p.pid in ranks else p
        for p in s.processes
    )
    return replace(s, t=t, processes=procs, jobs=s.jobs if same_jobs else group_jobs(procs))


def test_a_group_member_follows_a_rank_change_under_the_same_jobs_tuple():
    first = snapshot(1000.0, ["comm", "comm"], local=True)
    memory = GroupMemory()
    (group,) = memory.update(first)
    assert {i: m.rank for i, m in group.members.items()} == {0: 0, 1: 1}
    same = replace(first, t=1000.25)
    (group,) = memory.update(same)
    assert all(m.last_seen == 1000.25 for m in group.members.values())
    changed = _with_ranks(first, 1000.5, {1001: 7}, same_jobs=True)
    (group,) = memory.update(changed)
    assert {i: m.rank for i, m in group.members.items()} == {0: 0, 1: 7}
    assert group.ranks[1001] == (7, 1)


def test_a_gpu_whose_process_left_is_remembered_under_the_same_jobs_tuple():
    first = snapshot(1000.0, ["comm", "comm"])
    memory = GroupMemory()
    memory.update(first)
    memory.update(replace(first, t=1000.25))
    gone = replace(first.gpus[1], pids=())
    (group,) = memory.update(replace(first, t=1000.5, gpus=(first.gpus[0], gone)))
    # The job still lists the pid on GPU 1, so the member keeps it, but no process of the
    # job is on the GPU now: the member's pids come from the job (sorted), not the GPU.
    assert group.members[1].pids == (1000, 1001)
    assert group.members[0].pids == (1000,)


def test_equal_live_snapshots_give_the_same_groups_as_shared_objects():
    def run(share: bool) -> list[tuple[object, ...]]:
        memory, out, prev = GroupMemory(), [], None
        for k, states in enumerate([["comm", "comm"]] * 3 + [["comm", "gone"]] * 3):
            s = snapshot(1000.0 + k, states, local=True)
            if share and prev is not None and s.jobs == prev.jobs:
                s = replace(s, jobs=prev.jobs)
            prev = s
            (g,) = memory.update(s)
            out.append((sorted(g.members.items()), dict(g.departed), dict(g.ranks)))
        return out

    assert run(share=True) == run(share=False)


def test_the_node_report_sees_a_rank_change_under_the_same_jobs_tuple():
    first = snapshot(1000.0, ["comm", "comm"])
    report = NodeReport("h")
    ok = Verdict(t=1000.0)
    report.update(first)
    assert report.keys(ok, first)["ranks"] == {"0": 0, "1": 1}
    report.update(replace(first, t=1000.25))
    changed = _with_ranks(first, 1000.5, {1001: 5}, same_jobs=True)
    report.update(changed)
    keys = report.keys(ok, changed)
    assert keys["ranks"] == {"0": 0, "1": 5}
    keys["ranks"]["0"] = 99  # the caller's own copy: the next line is not changed by it
    assert report.keys(ok, changed)["ranks"] == {"0": 0, "1": 5}


def test_health_key_is_worked_out_again_when_a_record_comes():
    tracker = HealthTracker()
    quiet = health_key(tracker)
    assert health_key(tracker) == quiet
    rec = {"type": "health", "t": 1.0, "counters": {"0": {"ecc_uncorrected_volatile": 2}}}
    tracker.update(Snapshot(t=1.0, records=(rec,)))
    assert health_key(tracker) != quiet
    assert health_key(tracker)[0][0][1] == "degraded"
