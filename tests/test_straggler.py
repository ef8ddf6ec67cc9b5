"""Wait shares and stragglers (gputui.diagnose.slow.straggler), on real recordings and synthetic
traces of the hard negatives that must stay silent.

The real straggler is tests/data/h200x4-straggler-4x.jsonl.gz (4 x H200, rank 0 does 4x the
work; see h200x4-straggler-4x.md there); the healthy and hung phases come from the 2 x H200
calibration recording and the bundled demo built from it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gputui.collect.model import GpuSample
from gputui.collect.source import demo_path
from gputui.collect.trace.format import read_trace
from gputui.diagnose.job_groups import GroupMemory
from gputui.diagnose.slow.straggler import HOLD_S, Straggle, WaitShares, is_waiting
from gputui.diagnose.slow.words import headline, spans
from tests.synth import timeline

DATA = Path(__file__).parent / "data"
STRAGGLER = DATA / "h200x4-straggler-4x.jsonl.gz"
H200X2 = DATA / "h200x2-trace.jsonl.gz"


def judge_all(snaps) -> list[tuple[object, list[Straggle]]]:
    """Every sample with the Straggles of its jobs, as the detector feeds the tracker."""
    shares, memory, out = WaitShares(), GroupMemory(), []
    for s in snaps:
        groups = memory.update(s)
        shares.observe(s, groups)
        out.append((s, shares.judge(s, groups)))
    return out


def with_limit(snaps, watts: float = 700.0):
    """The recording with the power limit its README gives (the raw format has none)."""
    return [replace(s, gpus=tuple(replace(g, power_limit_w=watts) for g in s.gpus)) for s in snaps]


@pytest.fixture(scope="module", params=["raw", "with_power_limit"])
def straggler_run(request):
    snaps = read_trace(STRAGGLER)
    return judge_all(snaps if request.param == "raw" else with_limit(snaps))


def test_the_4x_straggler_is_named_within_15_s_of_the_imbalance(straggler_run):
    start = next(s.t for s, _ in straggler_run if s.phase == "imbalanced_mild")
    first = next((s, js) for s, js in straggler_run if any(j.slow for j in js))
    s, (job,) = first
    assert s.t - start <= 15.0
    assert job.stragglers == (0,) and job.waiters == (1, 2, 3)


def test_once_named_the_straggler_stays_named_until_the_job_ends(straggler_run):
    named = False
    for s, js in straggler_run:
        if len(s.gpus) and all(g.pids for g in s.gpus):
            named = named or any(j.slow for j in js)
            if named:
                assert [j.stragglers for j in js] == [(0,)], f"lost at {s.t}"
    assert named


def test_the_waiting_ranks_wait_in_nearly_every_sample_and_the_straggler_in_none(straggler_run):
    job = next(j for _, js in reversed(straggler_run) for j in js if j.slow)
    assert job.shares[0] == 0.0
    assert all(job.shares[i] >= 0.95 for i in job.waiters)


def test_the_headline_names_the_straggler_and_how_much_the_others_wait(straggler_run):
    job = next(j for _, js in straggler_run for j in js if j.slow)
    text = headline(job)
    assert "slow: GPU 0 is the straggler; GPUs 1-3 wait" in text
    assert "% of their samples" in text


@pytest.mark.parametrize("path", [H200X2, None], ids=["calibration", "demo"])
def test_no_phase_of_the_2_gpu_recording_is_slow_or_alike(path):
    """Training, the communication-only benchmark, the hangs (a hung job has no straggler),
    the idle server, the idle node and the gaps between jobs: never slow."""
    for s, js in judge_all(read_trace(path or demo_path())):
        assert not any(j.slow or j.alike for j in js), f"{s.phase} at {s.t}"


def test_ranks_sharing_one_gpu_are_never_judged():
    """The real H100 recording of two NCCL ranks on one GPU (NCCL_HOSTID): NVML sees one GPU
    for both, so there is nothing to compare and nothing is said."""
    res = judge_all(read_trace(DATA / "h100-shared-gpu-stuck.trace.jsonl.gz"))
    assert res and all(js == [] for _, js in res)


@pytest.mark.parametrize("name", ["idle", "imbalanced", "comm"])
def test_one_h100s_recordings_are_never_slow_or_stalled(name):
    """Recorded on one H100 with `gputui record` (tests/data/h100-one-gpu/README.md): the idle
    GPU, two NCCL ranks on it where rank 0 does 16x the matmuls, and two that only
    communicate. One GPU cannot show a straggler, and none of these is a hang: the
    communicating job spins to NVML's eyes, and the NCCL RAS answers the recording carries
    say its collectives advance, so its replay is busy, as it was live."""
    from gputui.watch.watcher import Watcher

    snaps = read_trace(DATA / "h100-one-gpu" / f"{name}.trace.jsonl.gz")
    assert len(snaps) > 15
    w = Watcher(live=False)
    verdicts = [w.update(s) for s in snaps]
    assert {v.state for v in verdicts} == {"ok"}
    assert all(js == [] or not any(j.slow for j in js) for _, js in judge_all(snaps))
    if name == "comm":
        assert any(v.reason.startswith("busy, not stalled") for v in verdicts)


def test_the_comm_only_benchmark_is_busy_never_waiting():
    snaps = [s for s in read_trace(H200X2) if s.phase == "comm_heavy"]
    verdicts = [is_waiting(g) for s in snaps for g in s.gpus if (g.util or 0) >= 90]
    assert verdicts and not any(verdicts)


# ------------------------------------------------------------------ synthetic hard negatives


def run(*segments, **kw) -> list[tuple[object, list[Straggle]]]:
    return judge_all(timeline(*segments, **kw))


def never_slow(results) -> bool:
    return not any(j.slow for _, js in results for j in js)


def test_idle_gpus_say_nothing():
    assert all(js == [] for _, js in run((40, ["idle"] * 4)))


def test_a_job_between_steps_is_silent():
    steps = [(3, ["compute"] * 4), (2, ["idle"] * 4)] * 8
    assert never_slow(run(*steps))


def test_an_evaluation_pause_is_silent():
    """All ranks evaluate (lighter kernels), or rank 0 evaluates for a few seconds while the
    others wait in a barrier, then training resumes."""
    res = run(
        (30, ["compute"] * 4),
        (10, ["comm"] * 4),
        (8, ["compute", "spin", "spin", "spin"]),
        (20, ["compute"] * 4),
    )
    assert never_slow(res)


def test_a_warm_up_with_uneven_ranks_is_not_slow():
    res = run((5, ["compute", "wait_4x", "wait_4x", "wait_4x"]), (30, ["compute"] * 4))
    assert never_slow(res)


def test_a_mild_imbalance_is_silent():
    assert never_slow(run((40, ["compute", "wait_mild", "wait_mild", "wait_mild"])))


def test_a_data_loader_bound_job_waits_alike_and_has_no_straggler():
    cycle = [(0.75, ["slow_peer"] * 4), (0.5, ["compute"] * 4)] * 30
    res = run(*cycle)
    assert never_slow(res)
    last = res[-1][1][0]
    assert last.alike and "all ranks wait alike" in headline(last)
    assert "bottleneck is outside the GPUs" in headline(last)


def test_a_job_whose_gpus_idle_alike_between_batches_is_not_slow():
    cycle = [(1.0, ["idle"] * 4), (1.0, ["compute"] * 4)] * 20
    assert never_slow(run(*cycle))


def test_the_16x_straggler_at_hang_spin_levels_is_named():
    res = run((5, ["idle"] * 4), (20, ["compute", "slow_peer", "slow_peer", "slow_peer"]))
    job = res[-1][1][0]
    assert job.stragglers == (0,)
    assert job.ranks == {0: 0, 1: 1, 2: 2, 3: 3}
    assert headline(job).startswith("job ")
    assert "rank 0 (GPU 0) is the straggler; ranks 1-3 (GPUs 1-3) wait" in headline(job)


def test_a_cpu_bound_straggler_that_rarely_runs_a_kernel_is_named():
    """Rank 0 spends 3.75 s of each 4 s step on its host CPU (its GPU idles), then computes
    for 0.25 s; the other ranks wait for it in their collective meanwhile."""
    step = [(3.75, ["idle", "slow_peer", "slow_peer"]), (0.25, ["compute"] * 3)]
    res = run(*(step * 6))
    job = res[-1][1][0]
    assert job.stragglers == (0,) and job.waiters == (1, 2)
    first = next(s.t for s, js in res if any(j.slow for j in js))
    assert first - res[0][0].t <= 15.0


def test_a_rank_that_stopped_launching_kernels_is_no_straggler():
    """The hang's shape: rank 0 sits idle for good while the others wait. Nothing is said
    here (the hang detector judges it), however long it lasts."""
    res = run((10, ["compute"] * 3), (30, ["idle", "slow_peer", "slow_peer"]))
    assert never_slow(res)


def test_two_stragglers_of_eight_are_both_named():
    states = ["compute", "compute"] + ["wait_4x"] * 6
    job = run((20, states))[-1][1][0]
    assert job.stragglers == (0, 1) and "are the stragglers" in headline(job)


def test_half_the_ranks_busy_half_waiting_still_names_the_busy_ones_of_a_pair():
    job = run((20, ["wait_4x", "compute"]))[-1][1][0]
    assert job.stragglers == (1,)


def test_most_ranks_busy_and_one_waiting_is_no_straggler_case():
    """Three busy ranks and one that waits: the waiting one is the odd one, but it is not
    holding anyone back; no straggler is named."""
    assert never_slow(run((20, ["compute", "compute", "compute", "wait_4x"])))


def test_a_straggler_that_catches_up_is_dropped_once_its_hold_runs_out():
    """The imbalance ends: the recent shares fall within a few seconds, then the named set
    holds for HOLD_S more (a verdict holds while its cause may still hold), then clears."""
    res = run((20, ["compute", "wait_4x", "wait_4x"]), (20, ["compute"] * 3))
    t_end = res[0][0].t + 20
    cleared = next(s.t for s, js in res if s.t > t_end and not any(j.slow for j in js))
    assert HOLD_S < cleared - t_end <= HOLD_S + 6.5
    assert not any(j.slow for s, js in res if s.t >= cleared for j in js)


def test_separate_jobs_are_judged_separately():
    res = run((20, ["compute", "wait_4x", "compute", "compute"]), jobs=[[0, 1], [2, 3]])
    by_job = {tuple(sorted(j.shares)): j for j in res[-1][1]}
    assert by_job[(0, 1)].stragglers == (0,) and not by_job[(2, 3)].slow


# ------------------------------------------------------------------ the per-sample pattern


def test_missing_readings_are_not_judged():
    assert is_waiting(GpuSample(0, util=None, pids=(1,))) is None
    assert is_waiting(GpuSample(0, util=99.0, pids=(1,))) is None  # nothing to tell it by
    assert is_waiting(GpuSample(0, util=99.0, mem_util=5.0)) is None  # no process
    assert is_waiting(GpuSample(0, util=3.0, mem_util=0.0, pids=(1,))) is None  # no kernel


def test_power_decides_when_memory_traffic_is_low():
    low = GpuSample(0, util=99.0, mem_util=8.0, power_w=320.0, power_limit_w=700.0, pids=(1,))
    high = replace(low, power_w=690.0)
    assert is_waiting(low) is True and is_waiting(high) is False
    assert is_waiting(replace(low, power_w=None)) is True  # judged from memory alone


def test_spans_writes_rank_lists_as_a_person_would():
    assert spans([3, 1, 2, 5]) == "1-3, 5"
    assert spans([0, 1]) == "0, 1"
    assert spans([]) == ""


def test_a_share_hovering_at_the_line_does_not_flap_the_waiting_set():
    """Shares that cross 0.5 back and forth stay counted as waiting until below 0.4, so
    `check --json` (which prints when the set changes) does not print a line per sample."""
    from gputui.diagnose.hang.detector import diagnose_trace

    cycle = [(0.5, ["slow_peer"] * 2), (0.5, ["compute"] * 2)] * 40  # shares ~0.5
    sets = [v.waiting_gpus for v in diagnose_trace(timeline(*cycle))]
    changes = sum(a != b for a, b in zip(sets, sets[1:], strict=False))
    assert (0, 1) in sets and changes <= 2


# ------------------------------------------------------------------ each rank against its peers


def test_a_waiting_rank_over_the_old_power_cut_is_not_named_beside_the_straggler():
    """4 x H200, rank 2 doing 2.5x the matmuls: rank 1 waits at 62 % of its limit, just over
    the fixed 60 % cut that once made it a straggler too. Against its busiest peer (99 %)
    it is clearly waiting, so only rank 2 is named."""
    states = ["wait_2_5x", "wait_2_5x_warm", "compute", "wait_2_5x"]
    res = run((3, ["idle"] * 4), (25, states))
    named = {j.stragglers for _, js in res for j in js if j.slow}
    assert named == {(2,)}
    job = res[-1][1][0]
    assert job.waiters == (0, 1, 3) and job.shares[1] >= 0.95


def test_a_gap_smaller_than_the_margins_is_silent_and_one_past_them_is_named():
    """The relative margins, stated: a rank REL_POWER_GAP of its limit and REL_MEM_GAP
    points of memory traffic below its busiest peer waits; one just inside them does not."""
    from gputui.diagnose.slow.straggler import REL_MEM_GAP, REL_POWER_GAP
    from gputui.diagnose.slow.straggler import _lighter as lighter

    def _lighter(g, ref):  # the readings is_waiting hands it
        return lighter(g.power_frac, g.mem_util, ref)

    busiest = (0.98, 23.0)
    at = GpuSample(0, util=98.0, mem_util=23.0 - REL_MEM_GAP, power_w=700 * (0.98 - REL_POWER_GAP),
                   power_limit_w=700.0, pids=(1,))  # fmt: skip
    assert _lighter(at, busiest)
    assert not _lighter(replace(at, power_w=at.power_w + 7.0), busiest)  # 1 % of the limit
    assert not _lighter(replace(at, mem_util=at.mem_util + 1.0), busiest)
    assert _lighter(replace(at, power_w=None), busiest)  # memory traffic alone, when no power


def test_a_straggler_whose_rule_comes_and_goes_is_one_steady_slow_state():
    """The imbalance holds but its shares hover at a margin, so the rule names the
    straggler for 5 s, not for 4 s, and so on: one slow state, never "ok" in between."""
    on = (5, ["compute", "wait_4x", "wait_4x"])
    off = (4, ["compute", "wait_mild", "wait_mild"])
    res = run((3, ["idle"] * 3), on, on, off, on, off, on, off, on)
    first = next(i for i, (_, js) in enumerate(res) if any(j.slow for j in js))
    states = [bool(js) and js[0].slow for _, js in res[first:]]
    assert all(states), "the slow state broke off while its cause held"
    assert {j.stragglers for _, js in res[first:] for j in js} == {(0,)}


def test_another_straggler_replaces_the_named_one_only_once_it_holds():
    """The slow rank moves from GPU 0 to GPU 2 for good: named once the window's shares
    show it (the old waits of GPU 2 must age out of WINDOW_S) and SWITCH_S more; a one-off
    blip of another rank is not named at all."""
    from gputui.diagnose.slow.straggler import SWITCH_S, WINDOW_S

    a = ["compute", "wait_4x", "wait_4x"]
    b = ["wait_4x", "wait_4x", "compute"]
    res = run((3, ["idle"] * 3), (20, a), (3, b), (12, a), (30, b))
    sets = [(s.t, js[0].stragglers) for s, js in res if js and js[0].slow]
    t_blip = res[0][0].t + 23
    assert all(st == (0,) for t, st in sets if t < t_blip + 12)
    t_move = res[0][0].t + 38
    switched = next(t for t, st in sets if st == (2,))
    assert SWITCH_S <= switched - t_move <= WINDOW_S + SWITCH_S
    assert all(st == (2,) for t, st in sets if t >= switched)


def test_a_named_straggler_whose_rank_dies_is_dropped_not_held():
    """The straggler's process leaves its GPU (it crashed: an OOM, a kill) while its peers
    still wait: the hold lets go at once rather than name a rank the job no longer has (it
    raised KeyError in the detector, and the dashboard stopped sampling)."""
    from gputui.collect.procs.jobs import group_jobs
    from gputui.diagnose.hang.detector import Detector

    states = ["wait_4x", "wait_4x", "wait_4x", "compute"]
    d = Detector()
    for s in timeline((20, states)):
        v = d.update(s)
    assert v.state == "slow" and "rank 3 (GPU 3) is the straggler" in v.reason
    for after in timeline((3, states), t0=v.t + 0.25):
        left = after.processes[:-1]  # rank 3's process is gone from GPU 3's list
        v = d.update(replace(after, processes=left, jobs=group_jobs(left)))
        assert "is the straggler" not in v.reason, v.reason
    assert v.state != "slow" and "rank 3 (pid 1003) has exited while its job runs on" in v.reason


def test_a_named_straggler_whose_rank_dies_as_a_new_rank_starts_is_dropped_not_held():
    """As above, but a new process of the job starts on another GPU at the same time (a
    restarted rank): with no full window there yet the rule says nothing, and the hold must
    still let go at once rather than name the dead rank from the answer it last gave."""
    from gputui.diagnose.hang.detector import Detector

    states = ["wait_4x", "wait_4x", "wait_4x", "compute", "free"]
    d = Detector()
    for s in timeline((20, states), jobs=[[0, 1, 2, 3]]):
        v = d.update(s)
    assert v.state == "slow" and "rank 3 (GPU 3) is the straggler" in v.reason
    moved = ["wait_4x", "wait_4x", "wait_4x", "gone", "compute"]
    for after in timeline((3, moved), jobs=[[0, 1, 2, 4]], t0=v.t + 0.25):
        assert 1004 in after.gpus[4].pids and not after.gpus[3].pids
        v = d.update(after)
        assert "is the straggler" not in v.reason, v.reason
    assert v.state != "slow"


def test_ranks_that_spin_at_the_onset_of_a_hang_are_not_said_to_wait_alike():
    """Every rank computes between waits, then every rank spins without a break (a
    mismatch of collectives): "all ranks wait alike" is true of the first part only; once
    the detector sees them spinning it is not said, and the hang detector speaks instead."""
    from gputui.diagnose.hang.detector import diagnose_trace

    cycle = [(0.75, ["slow_peer"] * 4), (0.5, ["compute"] * 4)] * 16
    verdicts = list(diagnose_trace(timeline(*cycle, (12, ["spin"] * 4))))
    t_spin = verdicts[0].t + 20
    assert any("wait alike" in v.reason for v in verdicts if v.t < t_spin)
    assert not any("wait alike" in v.reason for v in verdicts if v.t >= t_spin + 2.5)
    assert verdicts[-1].state == "stalled"
