"""A replay says what the live run said: the lastwords and rendezvous records a recording
carries are explained again by a Watcher that gathers nothing (live=False)."""

from __future__ import annotations

from dataclasses import replace

from synth import timeline

from gputui.collect.model import Snapshot
from gputui.watch import Watcher

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/job/train.py", line 88, in <module>\n'
    "    step()\n"
    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call\n"
)


def test_a_recorded_lastwords_record_gives_the_same_finding_in_a_replay():
    snaps = list(timeline((0.5, ["compute", "compute"]), (3.0, ["spin", "gone"])))
    rec = {
        "type": "lastwords",
        "t": snaps[-4].t,
        "job": snaps[0].jobs[0].key,
        "ranks": [
            {
                "pid": 1001,
                "rank": 1,
                "gone": True,
                "seen": True,
                "stderr": {"kind": "file", "path": "/job/rank1.err"},
                "stdout": {"kind": "pipe", "holder": "torchrun (pid 7)"},
                "log": "/job/rank1.err",
                "gpus": [1],
                "tail": TRACEBACK,
                "kernel": [[snaps[-4].t, "NVRM: Xid (PCI:0000:00:06): 31, pid=1001, name=python3"]],
            }
        ],
    }
    snaps[-4] = replace(snaps[-4], records=(rec,))
    w = Watcher(1.0, 60.0, live=False)
    v = None
    for s in snaps:
        v = w.update(s)
    assert v is not None and v.state == "stalled"
    assert v.findings[0] == (
        "rank 1 (pid 1001) died: CUDA error: an illegal memory access was encountered "
        "(train.py:88) (Xid 31 on GPU 1)"
    )
    assert v.ranked[0].lead == (  # the headline: the cause first, no pid
        "rank 1 died: CUDA error: an illegal memory access was encountered (train.py:88) "
        "(Xid 31 on GPU 1)"
    )
    (entry,) = [e for e in v.evidence["lastwords"]["ranks"] if e["rank"] == 1]
    assert entry["stdout"] == "a pipe to torchrun (pid 7)"


def test_a_recorded_rendezvous_is_a_rendezvous_hang_in_the_replay():
    rec = {
        "type": "rendezvous",
        "t": 100.0,
        "jobs": [
            {
                "job": "master:127.0.0.1:29500",
                "world": 3,
                "here": [{"pid": 11, "rank": 0}, {"pid": 12, "rank": 1}],
                "missing_ranks": [2],
                "missing_count": 1,
                "since": 80.0,
                "master_addr": "127.0.0.1",
                "master_port": 29500,
                "master_local": True,
                "listeners": [[11, "127.0.0.1:29500", "python3"]],
            }
        ],
    }
    w = Watcher(10.0, 60.0, live=False)
    v = w.update(Snapshot(t=100.0, source="replay", records=(rec,)))
    assert v.state == "stalled" and v.evidence["missing_ranks"] == [2]
    assert v.reason.startswith(
        "job master:127.0.0.1:29500: rendezvous hang: ranks 0,1 of world 3 have waited for 20 s"
    )
    assert "127.0.0.1:29500 is listening (the TCPStore, in rank 0 pid 11)" in v.reason
    v = w.update(Snapshot(t=150.0, source="replay"))
    assert v.state == "hung"  # 70 s of waiting
