"""GPU health in the verdict: a failed GPU or a rank's Xid leads a stalled job's headline.

Snapshots are synthetic (tests/synth.py, a 2-rank job on GPUs 0 and 1, rank r's pid 1000+r)
with `health` records in `Snapshot.records`, the form the live monitor makes and a replay
hands back, so these are also the replay's rules. The kernel-log line is the real Xid 31
line of tests/data/health (its pid changed to the rank's).
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from synth import timeline

from gputui.collect.kernlog import KernelLog
from gputui.collect.nvml.health import HealthMonitor
from gputui.collect.nvml.xid import XidEvent
from gputui.collect.trace.format import TraceWriter, read_trace
from gputui.diagnose.health.judge import HealthTracker
from gputui.diagnose.ranking import Strength
from gputui.watch.watcher import Watcher

DATA = Path(__file__).parent / "data" / "health"
REAL31 = json.loads((DATA / "xid-h100.json").read_text())["cases"]["illegal_address"]
LINE31 = REAL31["kernel_log"][0].split(" ", 1)[1].replace("pid=599", "pid=1001")


def health(t: float, *events: XidEvent, counters: dict | None = None, started: float = 0.0):
    rec: dict = {"type": "health", "t": t, "started": started}
    if events:
        rec["events"] = [e.to_json() for e in events]
    if counters is not None:
        rec["counters"] = counters
    return rec


def with_record(snaps, at: float, rec: dict):
    """The samples, with `rec` in the first one at or after time `at`."""
    done = False
    for s in snaps:
        if not done and s.t >= at:
            s, done = replace(s, records=(rec,)), True
        yield s


def watch(snaps) -> list:
    w = Watcher(10.0, 60.0, gatherers=(), live=False)
    try:
        return [w.update(s) for s in snaps]
    finally:
        w.close()


def rank1_dies(rec: dict, at: float = 1002.0):
    """Both ranks compute for 2 s, then rank 1's process is gone and rank 0 spins."""
    return with_record(timeline((2, ["compute", "compute"]), (12, ["spin", "gone"])), at, rec)


def test_a_ranks_program_xid_names_the_rank_pid_and_gpu_first():
    ev = XidEvent(1002.0, 31, "kernel", gpu=1, pci="0000:11:00", pid=1001, name="python3")
    v = watch(rank1_dies(health(1002.0, replace(ev, text=LINE31))))[-1]
    assert v.state == "stalled"
    assert v.reason.startswith("rank 1 (pid 1001, GPU 1) hit Xid 31: GPU memory page fault")
    assert "the GPU is fine" in v.reason
    assert v.ranked[0].strength == Strength.RANK_GONE and v.ranked[0].pids == (1001,)
    # the detector's sentence stays, ranked after (NVML's picture is the weakest evidence)
    assert any("spinning" in f.text and f.strength == Strength.NVML for f in v.ranked)


def test_a_hardware_xid_on_a_ranks_gpu_says_drain_the_node():
    ev = XidEvent(1003.0, 79, "nvml", gpu=1)
    v = watch(rank1_dies(health(1003.0, ev)))[-1]
    assert v.reason == "rank 1 (GPU 1) hit Xid 79: GPU fell off the bus; drain the node"
    assert v.ranked[0].strength == Strength.HARDWARE and v.ranked[0].gpus == (1,)


def test_a_stall_without_health_trouble_keeps_the_detectors_headline():
    v = watch(rank1_dies(health(1002.0, counters={"0": {"lost": False}, "1": {"lost": False}})))
    assert "has exited" in v[-1].reason and not any(f.source == "health" for f in v[-1].ranked)


def test_an_old_program_fault_of_another_process_is_not_the_jobs_cause():
    ev = XidEvent(500.0, 31, "kernel", gpu=1, pid=4242)  # long before the job, another pid
    v = watch(rank1_dies(health(1000.0, ev)))[-1]
    assert "has exited" in v.reason


def test_uncorrected_ecc_on_a_ranks_gpu_is_a_hardware_finding():
    counters = {"1": {"lost": False, "ecc_uncorrected_volatile": 3}}
    v = watch(rank1_dies(health(1000.0, counters=counters)))[-1]
    assert v.reason.startswith("rank 1 (GPU 1): the GPU is degraded: 3 uncorrected ECC error")


def test_nvmls_event_and_the_kernel_line_of_one_fault_are_one_event_with_the_pid():
    t = HealthTracker()
    t.update(
        replace(
            next(timeline((1, ["idle"]))),
            records=(health(10.0, XidEvent(10.2, 31, "nvml", gpu=0)),),
        )
    )
    line = XidEvent(10.0, 31, "kernel", pci="0000:00:06", pid=599, name="python3", text=LINE31)
    t.update(replace(next(timeline((1, ["idle"]))), records=(health(10.5, line),)))
    assert [(e.xid, e.gpu, e.pid, e.source) for e in t.events] == [(31, 0, 599, "kernel")]
    assert t.sick() == []  # a program's fault leaves the GPU ok


def test_a_malformed_health_record_is_skipped_not_raised():
    t = HealthTracker()
    bad = {
        "type": "health",
        "t": 1.0,
        "events": [{"xid": "x"}, 7, {"t": 1, "xid": -3}],
        "counters": {"a": 1, "0": "x"},
        "notes": [3],
    }
    t.update(replace(next(timeline((1, ["idle"]))), records=(bad,)))
    assert list(t.events) == [] and t.counters == {} and t.notes == []


class _NoNvml:
    """A reader without NVML: the monitor reads only the kernel log."""

    devices: list = []


def test_kernel_lines_from_before_start_count_within_the_window_and_say_their_age(tmp_path):
    fifo = tmp_path / "kmsg"
    os.mkfifo(fifo)
    log = KernelLog(str(fifo))
    log._boot = 0.0  # record times are seconds since boot: make them wall-clock seconds here
    mon = HealthMonitor(_NoNvml(), kernel_log=log, events=False, now=10_000.0)
    assert mon.poll(now=10_000.0) == []  # opens the log: nothing in it yet
    w = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    recs: list[dict] = []
    try:
        for seq, t in ((1, 5_000.0), (2, 9_000.0), (3, 10_050.0)):
            os.write(w, f"4,{seq},{int(t * 1e6)},-;{LINE31}\n".encode())
            got = mon.poll(now=10_100.0)
            if seq == 1:
                assert got == []  # 5000 s before the start: outside the hour
            recs += got
    finally:
        os.close(w)
        mon.close()
    tracker = HealthTracker()
    tracker.update(replace(next(timeline((1, ["idle"]), t0=10_100.0)), records=tuple(recs)))
    assert [(e.t, e.xid, e.pid) for e in tracker.events] == [
        (9_000.0, 31, 1001),
        (10_050.0, 31, 1001),
    ]
    old, new = tracker.events
    assert tracker.age(old, 10_100.0) == "18 min ago, before gputui started"
    assert tracker.age(new, 10_100.0) == "50 s ago"


def test_an_unreadable_kernel_log_is_said_once_and_nvml_goes_on(tmp_path):
    mon = HealthMonitor(_NoNvml(), kernel_log=KernelLog(str(tmp_path / "none")), now=1.0)
    first, second = mon.poll(now=1.0), mon.poll(now=2.0)
    assert first[0]["notes"][0].startswith("the kernel log is not readable")
    assert second == []


def test_a_recording_replays_the_xid_at_its_time_and_check_exits_3(tmp_path):
    from conftest import run_cli

    path = tmp_path / "rec.jsonl"
    w = TraceWriter(path)
    for s in timeline((3, ["idle", "idle"])):
        w.write(s)
        if s.t == 1001.0:
            w.write_record(health(s.t, XidEvent(s.t, 48, "nvml", gpu=1)))
    w.close()
    back = read_trace(path)
    at = [i for i, s in enumerate(back) if s.records]
    assert at == [4] and back[4].t == 1001.0
    r = run_cli("check", "--replay", str(path), "--json")
    assert r.returncode == 3, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert [(x["xid"], x["gpu"]) for x in last["health"]["xids"]] == [(48, 1)]
    assert last["health"]["gpus"]["1"]["health"] == "failed"


def _shared(t: float, both: bool):
    """Two ranks of one job on GPU 0 (NCCL_HOSTID, as on a one-GPU machine); rank 1 (pid
    1001) is gone when not `both`, and rank 0 spins waiting for it."""
    from synth import snapshot

    from gputui.collect.procs.jobs import group_jobs

    s = snapshot(t, ["compute"] if both else ["spin"])
    p0 = s.processes[0]
    p0 = replace(p0, rank=replace(p0.rank, world_size=2))
    p1 = replace(p0, pid=1001, rank=replace(p0.rank, rank=1))
    procs = (p0, p1) if both else (p0,)
    gpu = replace(s.gpus[0], pids=tuple(p.pid for p in procs))
    return replace(s, gpus=(gpu,), processes=procs, jobs=group_jobs(procs))


def test_ranks_sharing_a_gpu_the_kernel_lines_pid_names_the_rank_that_faulted():
    from synth import DT

    snaps = [_shared(1000 + i * DT, True) for i in range(8)]
    snaps += [_shared(1002 + i * DT, False) for i in range(60)]
    nvml = XidEvent(1002.2, 31, "nvml", gpu=0)  # NVML alone cannot say which rank
    kern = XidEvent(1002.0, 31, "kernel", pci="0000:10:00", pid=1001, name="python3")
    snaps[8] = replace(snaps[8], records=(health(1002.0, nvml, kern, started=900.0),))
    v = watch(snaps)[-1]
    assert v.gone == ((1001, 1),)
    assert v.reason.startswith("rank 1 (pid 1001, GPU 0) hit Xid 31")
    only_nvml = [*snaps]
    only_nvml[8] = replace(snaps[8], records=(health(1002.0, nvml, started=900.0),))
    # NVML alone names GPU 0, which both ranks share: the rank that is gone took it
    assert watch(only_nvml)[-1].reason.startswith("rank 1 (pid 1001, GPU 0) hit Xid 31")


def test_merge_names_a_nodes_failed_gpu_first_in_the_job_wide_verdict():
    from gputui.diagnose.merge.join import line_from_json, merge
    from gputui.diagnose.merge.merged import merged_to_json

    job = {"job_key": "master:10.0.0.1:29500", "world_size": 4}
    n1 = {
        "t": 10.0,
        "state": "stalled",
        "spinning": [0, 1],
        "host": "n1",
        "ranks": {"0": 0, "1": 1},
    }
    n2 = {"t": 10.5, "state": "ok", "host": "n2", "ranks": {"0": 2, "1": 3}}
    n2["health"] = {
        "gpus": {
            "0": {"health": "ok", "reason": ""},
            "1": {"health": "failed", "reason": "Xid 79: GPU fell off the bus"},
        }
    }
    m = merge([line_from_json({**n1, **job}, "x"), line_from_json({**n2, **job}, "x")])[-1]
    assert m.reason.startswith(
        "job master:10.0.0.1:29500: GPU n2:1 (rank 3) failed: Xid 79: GPU fell off the bus; "
        "stalled across 2 host(s)"
    )
    assert merged_to_json(m)["sick_gpus"] == ["n2:1 (rank 3) failed: Xid 79: GPU fell off the bus"]
    bad = line_from_json({**n2, "health": {"gpus": {"x": 1, "2": {"health": 5}}}}, "x")
    assert bad.sick == {}  # a malformed health key is skipped


def test_a_recent_program_fault_of_another_process_is_context_never_the_headline():
    """Seen on the GPU machine: a job died of DDP's error while the kernel log held an Xid 31
    of an earlier, unrelated process on the same GPU, 64 s before. The kernel names that
    pid; it is not a rank of this job, so it is said as context, never as the headline."""
    ev = XidEvent(995.0, 31, "kernel", gpu=1, pid=4242)  # just before the job, another pid
    v = watch(rank1_dies(health(1000.0, ev)))[-1]
    assert "has exited" in v.reason
    said = [f for f in v.ranked if "4242" in f.text]
    assert said and all(f.strength == Strength.CONTEXT for f in said)
