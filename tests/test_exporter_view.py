"""What the exporter exports, as plain data: the View built from each snapshot.

Covers the real 2 x H200 recording (the stall_in_loop hang and the rank that dies), the
detector's per-job verdicts, bounded label values (job keys, lone processes, long keys), N/A
readings, and a week of churning jobs and pids that must not grow the exported state.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from synth import DT, snapshot, timeline

from gputui.collect.model import GpuSample, ProcessInfo, RankInfo, Snapshot
from gputui.collect.procs.jobs import group_jobs
from gputui.diagnose.hang.detector import Detector
from gputui.exporter.view import MAX_LABEL, Suspect, Watch, bounded, job_label

DEMO_JOB = "master:127.0.0.1:29512"


def fed(snaps, **kw) -> Watch:
    w = Watch(Detector(**kw), host="testhost")
    for s in snaps:
        w.on_snapshot(s)
    return w


def views_of(snaps):
    """(snapshot, view) after each snapshot."""
    w = Watch(Detector(), host="testhost")
    for s in snaps:
        w.on_snapshot(s)
        yield s, w.current()[0]


# ---------------------------------------------------------------- the real recording


def test_the_demo_hang_exports_a_stalled_job_with_rank_1_on_gpu_1_as_suspect(demo_snaps):
    stalled = [(s, v) for s, v in views_of(demo_snaps) if v.jobs and v.jobs[0].state != "ok"]
    s, v = next((s, v) for s, v in stalled if s.phase.startswith("stall_in_loop"))
    (job,) = v.jobs
    assert job.job == DEMO_JOB and job.state == "stalled"
    assert job.suspects == (Suspect(gpu=1, rank=1, pid=815),)
    assert job.stall_s == pytest.approx(10.0, abs=0.5)  # raised as the detector says stalled
    gpu0, gpu1 = v.gpus
    assert (gpu0.state, gpu1.state) == ("spinning", "idle")
    assert gpu0.spin_s == pytest.approx(job.stall_s) and gpu1.spin_s == 0.0
    assert gpu0.util == 1.0 and gpu0.mem_util == 0.0 and gpu0.power_limit_w == 700.0
    assert gpu0.uuid.startswith("GPU-") and gpu0.processes == 1
    assert v.host == "testhost"  # the demo recording does not name its host


def test_a_rank_that_died_is_still_named_with_its_rank(demo_snaps):
    """rank_dies: rank 1 (pid 1025) exits; its process is gone from the snapshot, but the
    suspect series still says rank 1, from what the exporter saw before."""
    found = [
        v.jobs[0]
        for s, v in views_of(demo_snaps)
        if s.phase.startswith("rank_dies") and v.jobs and v.jobs[0].state != "ok"
    ]
    assert found, "the rank_dies hang was not detected"
    assert found[0].suspects == (Suspect(gpu=1, rank=1, pid=1025),)


def test_job_series_go_when_the_job_goes(demo_snaps):
    w = Watch(Detector(), host="h")
    seen_job = False
    for s in demo_snaps:
        w.on_snapshot(s)
        view = w.current()[0]
        if not s.processes:  # between phases: no job on the node
            assert view.jobs == ()
        seen_job |= bool(view.jobs)
    assert seen_job


def test_readings_that_are_not_available_are_none_not_zero():
    s = snapshot(1000.0, ["compute", "idle"])
    na = replace(
        s.gpus[1],
        util=None,
        mem_util=None,
        power_w=None,
        mem_used_mb=None,
        na={"util": "Not Supported", "pids": "Unknown Error"},
    )
    w = fed([replace(s, gpus=(s.gpus[0], na))])
    g0, g1 = w.current()[0].gpus
    assert g0.util == pytest.approx(0.98) and g0.processes == 1
    assert (g1.util, g1.mem_util, g1.power_w, g1.mem_used_bytes, g1.processes) == (None,) * 5
    assert g1.state == "unknown"


# ---------------------------------------------------------------- the detector's job states


def test_the_detector_keeps_a_verdict_for_every_stalled_job_not_only_the_worst():
    """Two jobs stall at once on one node (GPUs 0-1 and 2-3); the Verdict is the worse one,
    `job_verdicts` has both, and the View exports both with their own suspects."""
    snaps = list(
        timeline((12, ["spin", "idle", "idle", "spin"]), jobs=[[0, 1], [2, 3]]),
    )
    w = fed(snaps)
    assert set(w.detector.job_verdicts) == {"master:h:29500", "master:h:29501"}
    jobs = {j.job: j for j in w.current()[0].jobs}
    assert jobs["master:h:29500"].suspects == (Suspect(1, 1, 1001),)
    assert jobs["master:h:29501"].suspects == (Suspect(2, 0, 1002),)
    assert {j.state for j in jobs.values()} == {"stalled"}


def test_a_healthy_job_beside_a_stalled_one_is_ok_with_no_suspects():
    w = fed(timeline((12, ["spin", "idle", "compute", "compute"]), jobs=[[0, 1], [2, 3]]))
    jobs = {j.job: j for j in w.current()[0].jobs}
    assert jobs["master:h:29501"].state == "ok"
    assert jobs["master:h:29501"].suspects == () and jobs["master:h:29501"].stall_s == 0.0
    assert jobs["master:h:29500"].state == "stalled"


def test_hung_after_hang_after():
    w = fed(timeline((61, ["spin", "idle"])))
    (job,) = w.current()[0].jobs
    assert job.state == "hung" and job.stall_s >= 60.0


# ---------------------------------------------------------------- bounded labels


def test_a_lone_process_is_labelled_by_its_gpus_not_its_pid():
    assert job_label("pid:12345", [3, 1]) == "process:gpu1+3"
    assert job_label("torchelastic:abc", [0]) == "torchelastic:abc"


def test_long_label_values_are_cut_but_stay_distinct():
    a, b = "torchelastic:" + "x" * 300 + "a", "torchelastic:" + "x" * 300 + "b"
    assert len(bounded(a)) == MAX_LABEL and bounded(a) != bounded(b)
    assert bounded("short") == "short"


def test_two_lone_processes_on_one_gpu_make_one_job_row():
    """Two notebooks on GPU 0 (no rank variables): one `process:gpu0` row, not two rows
    with the same labels (which would make the scrape invalid)."""
    procs = tuple(
        ProcessInfo(pid=p, cmdline=("python", "nb.py"), gpus=(0,), live=False) for p in (7, 8)
    )
    g = GpuSample(index=0, util=0.0, mem_util=0.0, power_w=120.0, power_limit_w=700.0, pids=(7, 8))
    w = fed([Snapshot(t=1.0, gpus=(g,), processes=procs, jobs=group_jobs(procs))])
    assert [j.job for j in w.current()[0].jobs] == ["process:gpu0"]


# ---------------------------------------------------------------- a week of churn


def _churn_snapshot(t: float, n: int) -> Snapshot:
    """Sample n of a node where jobs come and go: 8 GPUs, two new 2-rank jobs (GPUs 0-1 and
    2-3) every 50 samples with new pids and MASTER_PORTs, a lone process on GPU 4 restarting
    every 7 samples, and every 200 samples a job that stalls (GPU 0 spins, GPU 1 idles)."""
    job, k = divmod(n, 50)
    stalling = job % 4 == 0 and k >= 10
    states = ["spin", "idle"] if stalling else ["compute", "compute"]
    states += ["compute", "compute", "idle", "free", "free", "free"]
    snap = snapshot(t, states, jobs=[[0, 1], [2, 3]])
    base = 10_000 + job * 10
    lone = 900_000 + n // 7
    gpus, procs = [], []
    for g in snap.gpus:
        pids = {0: (base,), 1: (base + 1,), 2: (base + 2,), 3: (base + 3,), 4: (lone,)}
        gpus.append(replace(g, pids=pids.get(g.index, ())))
    for i in range(4):
        rank = RankInfo(rank=i % 2, world_size=2, master=f"10.0.0.1:{30000 + job * 2 + i // 2}")
        procs.append(ProcessInfo(pid=base + i, gpus=(i,), rank=rank, cmdline=("t",), live=False))
    procs.append(ProcessInfo(pid=lone, gpus=(4,), cmdline=("python", "serve.py"), live=False))
    return Snapshot(t=t, gpus=tuple(gpus), processes=tuple(procs), jobs=group_jobs(procs))


def test_a_week_of_churning_jobs_and_pids_keeps_the_exported_state_bounded():
    """10,000 samples (a week of churn, compressed): 400 jobs and ~1,400 restarts of a lone
    process. The View never holds more than the jobs on the node now, and the exporter's
    own memory of pids (for dead ranks) stays as small as the detector's."""
    w = Watch(Detector(), host="h")
    most_jobs = most_suspects = most_pids = 0
    labels: set[str] = set()
    stalled = 0
    for n in range(10_000):
        w.on_snapshot(_churn_snapshot(1000.0 + n * DT * 4, n))
        view = w.current()[0]
        most_jobs = max(most_jobs, len(view.jobs))
        most_suspects = max(most_suspects, sum(len(j.suspects) for j in view.jobs))
        most_pids = max(most_pids, w.remembered_pids)
        stalled += any(j.state != "ok" for j in view.jobs)
        labels.update(j.job for j in view.jobs)
    assert stalled > 0, "the churn never stalled: the test would prove nothing about suspects"
    assert most_jobs <= 3  # two 2-rank jobs and the lone process
    assert most_suspects <= 1
    assert most_pids <= 8  # the ranks the detector still remembers, no more
    assert len(w.detector.memory.groups) <= 3
    # The lone process restarted ~1,400 times under one label; only real jobs add labels.
    assert "process:gpu4" in labels and not any(x.startswith("pid:") for x in labels)
    assert len(labels) == 2 * 200 + 1
