"""A replay says what the live run said: the lastwords and rendezvous records a recording
carries are explained again by a Watcher that gathers nothing (live=False)."""

from __future__ import annotations

from dataclasses import replace

from synth import timeline

from gputui.collect.model import Snapshot
from gputui.watch.watcher import Watcher

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
        "rank 1 (pid 1001) died: CUDA error: an illegal memory access "
        "(train.py:88) (Xid 31 on GPU 1)"
    )
    assert v.ranked[0].lead == (  # the headline: the cause first, no pid
        "rank 1 died: CUDA error: an illegal memory access (train.py:88) (Xid 31 on GPU 1)"
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


async def test_the_dashboard_shows_the_gone_ranks_last_words_at_80x24_with_no_key():
    from screen import run_to_end, screen_text

    from gputui.collect.source import ReplaySource
    from gputui.ui.app import GputuiApp

    snaps = list(timeline((0.5, ["compute", "compute"]), (12.0, ["spin", "gone"])))
    rec = {
        "type": "lastwords",
        "t": snaps[-4].t,
        "job": snaps[0].jobs[0].key,
        "ranks": [{"pid": 1001, "rank": 1, "gone": True, "seen": True, "tail": TRACEBACK}],
    }
    snaps[-4] = replace(snaps[-4], records=(rec,))
    app = GputuiApp(ReplaySource(snaps, name="test", realtime=False))
    async with app.run_test(size=(80, 24)) as pilot:
        await run_to_end(app, pilot)
        lines = screen_text(app)
    assert any(
        ln.startswith("▶ rank 1 died: CUDA error: an illegal memory access (train.py:88)")
        for ln in lines
    ), "\n".join(lines)
    assert all(len(ln) <= 80 for ln in lines)


def test_without_stacks_only_a_one_node_job_with_ranks_missing_is_named():
    from gputui.collect.model import RankInfo
    from gputui.collect.procs.hostranks import HostRank
    from gputui.tools.gather.rendezvous import judge_job

    def r(pid: int, rank: int, world: int, addr: str) -> HostRank:
        info = RankInfo(rank=rank, world_size=world, master=f"{addr}:1")
        return HostRank(pid, 1.0, info, "python3", addr, 1)

    one_node = judge_job("k", [r(1, 0, 2, "127.0.0.1")], stacks=False)
    assert one_node is not None and one_node["missing_ranks"] == [1]
    assert one_node["no_stack"] == "stacks are off (--no-auto-dump)"
    assert judge_job("k", [r(1, 0, 1, "127.0.0.1")], stacks=False) is None  # nobody missing
    assert judge_job("k", [r(1, 0, 2, "10.9.9.9")], stacks=False) is None  # other nodes


def test_a_recording_keeps_the_lastwords_record_and_its_hostile_text(tmp_path):
    """Written by the recorder's writer, read back by the replay reader: same finding, and
    the escape codes of the rank's log are still escaped in the sentence."""
    from gputui.collect.trace.format import TraceWriter
    from gputui.collect.trace.read import read_trace

    snaps = list(timeline((0.5, ["compute", "compute"]), (3.0, ["spin", "gone"])))
    tail = TRACEBACK.replace("illegal", "\x1b[2Jillegal")
    rec = {
        "type": "lastwords",
        "t": snaps[-4].t,
        "job": snaps[0].jobs[0].key,
        "ranks": [{"pid": 1001, "rank": 1, "gone": True, "seen": True, "tail": tail}],
    }
    path = tmp_path / "r.jsonl.gz"
    w = TraceWriter(path)
    for i, s in enumerate(snaps):
        w.write(s)
        if i == len(snaps) - 4:
            w.write_record(rec)
    w.close()
    back = read_trace(path)
    watcher = Watcher(1.0, 60.0, live=False)
    v = None
    for s in back:
        v = watcher.update(s)
    assert v is not None
    assert v.findings[0].startswith(
        "rank 1 (pid 1001) died: CUDA error: an \\x1b[2Jillegal memory access (train.py:88)"
    )


def test_merge_shows_a_gone_ranks_last_words_under_its_node():
    from gputui.diagnose.merge.join import line_from_json, merge
    from gputui.diagnose.merge.merged import merged_to_json

    def line(host: str, state: str, findings: list[str]) -> dict:
        return {
            "t": 10.0,
            "state": state,
            "spinning": [0] if state != "ok" else [],
            "suspects": [],
            "reason": "",
            "host": host,
            "job_key": "master:10.0.0.1:29500",
            "world_size": 2,
            "ranks": {"0": 0 if host == "a" else 1},
            "findings": findings,
        }

    said = "rank 1 (pid 815) died: CUDA error: an illegal memory access (train.py:88)"
    lines = [
        line_from_json(line("a", "stalled", []), "a"),
        line_from_json(line("b", "stalled", [said]), "b"),
    ]
    d = merged_to_json(merge(lines)[-1])
    assert d["findings"] == [f"b: {said}"]
