"""A busy job on every face: the banner's BUSY badge, `check`'s exit code, the steady
`check --json` key, a replay of progress records, merge across nodes and the exporter (a
real process writing, a real one sleeping, the exporter's own /proc readings).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from synth import timeline, with_real_pids

from gputui.collect.nvml.xid import XidEvent
from gputui.diagnose import exitcodes
from gputui.diagnose.hang.detector import Detector
from gputui.diagnose.merge.join import line_from_json, merge
from gputui.diagnose.verdict import Verdict, verdict_to_json
from gputui.exporter.busy import BusySuspects
from gputui.exporter.view import Watch
from gputui.ui.widgets.banner import banner_height, banner_lines
from gputui.watch.watcher import Watcher

RANK = Path(__file__).parent / "targets" / "busy_rank.py"
T0 = 1000.0


def test_busy_is_no_alarm_and_exits_0():
    v = Verdict(t=1.0, state="busy")
    assert not v.alarm
    assert exitcodes.of_state("busy") == exitcodes.OK
    assert "busy" in exitcodes.help_text()


def busy_verdict(rate: str = "82 MB/s") -> Verdict:
    b = {"rank": 0, "pid": 815, "gpu": 0, "what": "writes a checkpoint", "rate": rate}
    reason = f"rank 0 writes a checkpoint: save_checkpoint (train.py:88), {rate} for 40 s"
    return Verdict(t=1.0, state="busy", spinning=(1,), suspects=(0,), reason=reason, busy=b)


def test_the_banner_has_a_busy_badge_of_its_own_with_the_sentence_at_80_columns():
    v = busy_verdict()
    lines = [s.text for s in banner_lines(v, 2.0, 80)]
    assert lines[0].startswith(" BUSY   rank 0 writes a checkpoint: save_checkpoint (train.py:88)")
    flat = " ".join(x.strip() for x in lines)
    assert "82 MB/s for 40 s · GPU 1 waits" in flat
    assert "STALLED" not in flat and "suspect" not in flat
    assert banner_height(v, 80) == len(lines) <= 3


def test_the_json_line_carries_busy_and_its_key_ignores_the_rate():
    a, b = busy_verdict("82 MB/s"), busy_verdict("79 MB/s")
    assert verdict_to_json(a)["busy"]["what"] == "writes a checkpoint"
    assert a.key() == b.key()  # a new `check --json` line when what it says changes only
    assert a.key() != replace(a, busy={**a.busy, "what": "reads"}).key()


def test_an_age_in_a_finding_is_no_new_line():
    a = Verdict(t=1.0, state="stalled", findings=("rank 1 died 14 s ago: CUDA error",))
    b = replace(a, findings=("rank 1 died 15 s ago: CUDA error",))
    c = replace(a, findings=("rank 1 died 3 min ago: CUDA error",))
    assert a.key() == b.key() == c.key()
    assert a.key() != replace(a, findings=("rank 2 died 14 s ago: CUDA error",)).key()


def test_an_xid_from_before_the_start_is_one_steady_verdict_not_one_per_sample():
    """The kernel's Xid 31 of a pid gone before gputui started, on the missing rank's GPU:
    its finding says its age, which grows every sample; the verdict's key does not."""
    line = "NVRM: Xid (PCI:0000:11:00): 31, pid=4242, name=python3, Ch 00000008"
    ev = XidEvent(T0 - 20, 31, "kernel", gpu=1, pci="0000:11:00", pid=4242, text=line)
    rec = {"type": "health", "t": T0, "started": T0, "events": [ev.to_json()]}
    snaps = list(timeline((14, ["spin", "gone"]), t0=T0, local=True))
    snaps[0] = replace(snaps[0], records=(rec,))
    w = Watcher(10.0, 60.0, gatherers=(), live=False)
    try:
        vs = [w.update(s) for s in snaps]
    finally:
        w.close()
    alarms = [v for v in vs if v.alarm]
    assert len(alarms) > 4
    xid = [f for f in alarms[-1].findings if "Xid 31" in f]
    assert xid and "ago" in xid[0], alarms[-1].findings
    assert len({v.findings for v in alarms}) > 1  # the age grows ...
    assert len({v.key() for v in alarms}) == 1  # ... and no new line is printed for it


def progress_record(t: float, pid: int, write_per_s: int) -> dict:
    samples = [[t - 8 + i, 1.0, 0, write_per_s * i, 0, write_per_s * i] for i in range(9)]
    entry = {"pid": pid, "rank": 1, "gpu": 1, "first": [samples[0]], "samples": samples}
    entry["dumps"] = [
        {"t": t - 1, "outcome": "done", "moved": False, "frame": "save_checkpoint (t.py:9)"}
    ]
    return {"type": "progress", "t": t, "job": "master:h:29500", "ranks": [entry]}


def test_a_replayed_progress_record_makes_the_same_busy_verdict():
    snaps = list(timeline((3, ["compute", "compute"]), (12, ["spin", "idle"]), t0=T0))
    at = next(i for i, s in enumerate(snaps) if s.t >= T0 + 11)
    snaps[at] = replace(snaps[at], records=(progress_record(snaps[at].t, 1001, 50_000_000),))
    w = Watcher(5.0, 60.0, gatherers=(), live=False)
    try:
        vs = [w.update(s) for s in snaps]
    finally:
        w.close()
    assert vs[at - 1].state == "stalled" and vs[at].state == "busy"
    # for as long as its peers have waited: the spin began at +3 s, the last sample +14.75 s
    assert vs[-1].reason == "rank 1 writes a checkpoint: save_checkpoint (t.py:9), 50 MB/s for 12 s"
    # and past --busy-limit, the same record is an alarm with the reason
    w = Watcher(5.0, 60.0, gatherers=(), live=False, busy_limit=5.0)
    try:
        v = [w.update(s) for s in snaps][-1]
    finally:
        w.close()
    assert v.state == "stalled" and v.busy["what"] == "writes a checkpoint"
    assert v.reason.startswith("busy for 12 s, past --busy-limit (5 s): rank 1 writes a checkpoint")


def node(host, state, **kw):
    return line_from_json({"t": 10.0, "state": state, "job_key": "master:x:1", **kw}, host)


def test_merge_a_busy_node_makes_the_job_busy_when_the_others_only_wait():
    lines = [
        node("a", "stalled", spinning=[0, 1], ranks={"0": 0, "1": 1}),
        node("b", "busy", spinning=[1], ranks={"0": 2, "1": 3}, reason="rank 2 writes: 80 MB/s"),
    ]
    m = merge(lines)[-1]
    assert m.state == "busy" and exitcodes.of_state(m.state) == exitcodes.OK
    assert "b: rank 2 writes: 80 MB/s" in m.reason and "a wait for it" in m.reason
    stuck = [*lines[:1], node("c", "stalled", spinning=[0], suspects=[1], ranks={"0": 4, "1": 5})]
    m = merge([*stuck, lines[1]])[-1]
    assert m.state == "stalled" and m.suspects == ("c:1",)


@pytest.fixture
def rank1(tmp_path: Path) -> Iterator:
    procs = []

    def start(role: str, *args: str) -> int:
        p = subprocess.Popen(
            [sys.executable, str(RANK), role, "--lifetime", "90", *args],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        procs.append(p)
        assert p.stdout is not None and p.stdout.readline().startswith("ready ")
        return p.pid

    yield start
    for p in procs:
        p.kill()
        p.wait(timeout=10)
        if p.stdout is not None:
            p.stdout.close()


def exporter_state(pids: list[int], until: str, deadline_s: float = 30.0) -> str:
    """Feed the exporter's Watch live samples (real pids, synthetic GPUs, wall time) until
    its job's state is `until` or the deadline passes; the last state."""
    w = Watch(Detector(3.0, 60.0), host="h", busy=BusySuspects())
    state, deadline, calm = "ok", time.monotonic() + deadline_s, 2
    while time.monotonic() < deadline:
        states = ["compute", "compute"] if calm else ["spin", "idle"]
        calm = max(0, calm - 1)
        w.on_snapshot(with_real_pids(time.time(), pids, states))
        view, _ = w.current()
        assert view is not None
        state = view.jobs[0].state
        if state == until:
            return state
        time.sleep(0.25)  # the exporter's sampling interval, not a wait for a result
    return state


def test_the_exporter_calls_a_job_whose_suspect_writes_busy_and_one_that_sleeps_stalled(
    rank1, tmp_path
):
    writer = rank1("checkpoint", "--rate", "20", "--path", str(tmp_path / "c.pt"))
    waiter = rank1("wait")
    assert exporter_state([waiter, writer], "busy") == "busy"
    sleeper = rank1("stuck")
    assert exporter_state([waiter, sleeper], "stalled") == "stalled"
    # a busy-wait loop moves no bytes, and the exporter sees no frames: stalled
    loop = rank1("busyloop")
    assert exporter_state([waiter, loop], "busy", deadline_s=8.0) == "stalled"
