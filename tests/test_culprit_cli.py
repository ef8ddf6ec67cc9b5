"""The culprit's frame through the faces: check (JSON and text), record and replay, bundle.

A live `check` needs NVML, which CI lacks; the JSON and text lines are checked on the demo
(the real H200 recording with the real py-spy dumps of its hung ranks) and on recordings
written by `gputui record`'s own loop over real processes.

Covers: check --demo --json (first five keys unchanged, a stalled line with culprit_frame
and stacks), the text mode's findings under the stalled line, --no-auto-dump on every face,
record + replay keeping the stacks at the right sample, and verdict.json in the bundle.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest
from conftest import free_port, run_cli
from synth import timeline, with_real_pids
from targets.launch import Targets

from gputui.cli import build_parser
from gputui.collect.model import Snapshot
from gputui.collect.source import ReplaySource
from gputui.collect.trace.format import TraceWriter, read_trace
from gputui.commands.record import write_samples
from gputui.diagnose.verdict import Verdict
from gputui.tools.bundle.write import write_bundle
from gputui.tools.which import find_tool
from gputui.watch.watcher import DEFAULT_GATHERERS, Watcher

needs_py_spy = pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")
FIRST_FIVE = ["t", "state", "spinning", "suspects", "reason"]
ENTRY_KEYS = [
    "pid", "rank", "gpu", "role", "outcome", "frame", "collective", "line", "stack", "error"
]  # fmt: skip


@pytest.fixture
def targets() -> Iterator[Targets]:
    t = Targets()
    yield t
    t.close()


def test_check_demo_json_has_a_stalled_line_naming_the_stuck_line_of_python():
    r = run_cli("check", "--demo", "--json")
    assert r.returncode == 1, r.stderr  # the demo ends ok, but held hangs: the worst seen
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert all(list(x)[:5] == FIRST_FIVE for x in lines)
    assert "stacks" not in lines[0]  # before any dump: the line as it always was
    stalled = [x for x in lines if x["state"] == "stalled"]
    first = stalled[0]
    assert first["culprit_frame"] == "<module> (worker2.py:37)"
    assert first["findings"] == [
        "rank 1 (pid 815) is in <module> (worker2.py:37)",
        "rank 0 waits in synchronize (worker2.py:21)",
    ]
    assert [list(e) for e in first["stacks"]] == [ENTRY_KEYS, ENTRY_KEYS]
    assert [(e["rank"], e["role"], e["collective"]) for e in first["stacks"]] == [
        (0, "waiting", "synchronize"),
        (1, "suspect", None),
    ]
    died = stalled[-1]  # the rank_dies job: the real failed dump of the exited rank
    assert died["culprit_frame"] is None
    assert died["findings"][0] == "rank 1 (pid 1025) is gone: its process exited"


def test_check_demo_text_prints_the_findings_under_the_stalled_line():
    r = run_cli("check", "--demo", "--no-auto-dump")
    assert r.returncode == 1, r.stderr
    out = r.stdout.splitlines()
    i = next(i for i, ln in enumerate(out) if "STALLED" in ln)
    # The culprit's line is the headline (the strongest finding), said once; the rest follow.
    assert out[i + 1].strip() == "rank 1 (pid 815) is in <module> (worker2.py:37)"
    assert out[i + 2].strip() == "- rank 0 waits in synchronize (worker2.py:21)"


def test_no_auto_dump_is_an_option_of_the_app_check_and_record():
    p = build_parser()
    assert p.parse_args(["--no-auto-dump"]).no_auto_dump
    assert p.parse_args(["check", "--no-auto-dump"]).no_auto_dump
    assert p.parse_args(["record", "x.jsonl", "--no-auto-dump"]).no_auto_dump
    assert not p.parse_args(["check"]).no_auto_dump


def test_a_typed_record_is_attached_to_the_first_sample_at_or_after_its_time(tmp_path):
    snaps = list(timeline((2, ["spin", "idle"])))
    path = tmp_path / "t.jsonl.gz"
    w = TraceWriter(path)
    for s in snaps[:4]:
        w.write(s)
    w.write_record({"type": "stacks", "t": snaps[2].t + 0.1, "job": "j", "ranks": []})
    for s in snaps[4:]:
        w.write(s)
    w.write_record({"type": "stacks", "t": snaps[-1].t + 99, "job": "late", "ranks": []})
    w.close()
    back = read_trace(path)
    assert [s.t for s in back] == [s.t for s in snaps]  # records are not samples
    assert [i for i, s in enumerate(back) if s.records] == [3, len(snaps) - 1]
    assert back[3].records[0]["job"] == "j" and back[-1].records[0]["job"] == "late"


def test_a_typed_record_with_a_bad_envelope_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.jsonl"
    for rec in ('{"type": 5, "t": 1}', '{"type": "stacks", "t": "x"}', '{"type":"Stacks","t":1}'):
        bad.write_text(rec + "\n")
        r = run_cli("check", "--replay", str(bad))
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (rec, r.stderr)
        assert r.stderr.startswith("gputui: ") and "bad.jsonl:1" in r.stderr


def live_snapshot(t: float, pids: list[int], states: list[str]) -> Snapshot:
    """GPU r in states[r], holding the real process pids[r] (rank r)."""
    return with_real_pids(t, pids, states, master="h:7")


class RealProcesses:
    """A live source for tests: samples taken now (Unix time), naming real processes, with
    the GPU readings given per sample (no GPU here)."""

    kind, description = "nvml", "real processes, synthetic GPUs"

    def __init__(self, pids: list[int], states: list[list[str]], interval: float) -> None:
        self.pids, self.states, self.interval = pids, list(states), interval

    def sample(self) -> Snapshot | None:
        if not self.states:
            return None
        return live_snapshot(time.time(), self.pids, self.states.pop(0))

    def next_delay(self) -> float:
        return self.interval

    def close(self) -> None:
        pass


@needs_py_spy
def test_record_writes_the_dump_and_replay_shows_it_at_the_right_sample(targets, tmp_path):
    env = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}
    env["MASTER_PORT"] = str(free_port())
    pids = [
        targets.start(role, env={**env, "RANK": str(r)}).pid
        for r, role in enumerate(["allreduce", "loader"])
    ]
    interval = 0.1
    states = [["compute"] * 2] * 5 + [["spin", "idle"]] * 25
    path = tmp_path / "rec.jsonl.gz"
    # The stack dump only (the NCCL gatherer, which says this job has no NCCL, is tested apart)
    stacks_only = [g for g in DEFAULT_GATHERERS if g[0] == "stacks"]
    writer, watcher = TraceWriter(path), Watcher(1.0, 60.0, gatherers=stacks_only)
    try:  # `gputui record`'s own loop
        source = RealProcesses(pids, states, interval)
        write_samples(source, writer, watcher, interval, None, threading.Event())
    finally:
        watcher.close()
        writer.close()
    live = watcher.latest()
    assert live is not None and live.culprit_frame
    back = read_trace(path)
    assert len(back) == len(states)
    replay = Watcher(1.0, 60.0, live=False)
    verdicts = [replay.update(s) for s in back]
    stall = next(i for i, v in enumerate(verdicts) if v.alarm)

    def dumps(s):  # the stack dumps (the spin's progress records ride along: #32)
        return [r for r in s.records if r["type"] == "stacks"]

    (at,) = [i for i, s in enumerate(back) if dumps(s)]
    assert at == stall + 1  # taken just after the transition: at the next sample
    (rec,) = dumps(back[at])
    assert rec["type"] == "stacks" and rec["trigger"] == "stalled"
    assert [r["pid"] for r in rec["ranks"]] == pids
    assert verdicts[at].culprit_frame == live.culprit_frame
    assert verdicts[-1].findings == live.findings  # every record replayed: the same words
    assert verdicts[stall].findings == ()  # not before the dump was taken
    assert replay.transitions == 0  # replay gathers nothing


def test_bundle_verdict_json_carries_the_findings_and_stacks_of_a_recording(tmp_path):
    # The demo ends healthy: a recording of it up to its first stall.
    snaps = ReplaySource.demo(realtime=False).snaps
    end = next(i for i, s in enumerate(snaps) if s.phase == "stall_in_loop_dumping") + 12
    path = tmp_path / "stalled.jsonl.gz"
    w = TraceWriter(path)
    for s in snaps[:end]:
        w.write(s)
        for rec in s.records:
            w.write_record(rec)
    w.close()
    r = run_cli("bundle", "--replay", str(path), "--out", str(tmp_path / "b"))
    assert r.returncode == 1, r.stderr  # the stall it bundles: as check says
    v = json.loads((tmp_path / "b" / "verdict.json").read_text())
    assert v["state"] == "stalled" and v["culprit_frame"] == "<module> (worker2.py:37)"
    assert v["findings"][0] == "rank 1 (pid 815) is in <module> (worker2.py:37)"
    assert [e["role"] for e in v["stacks"]] == ["waiting", "suspect"]


@needs_py_spy
def test_a_live_bundle_of_a_stalled_job_reads_its_own_dumps_into_verdict_json(targets, tmp_path):
    env = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533"}
    pids = [
        targets.start(role, env={**env, "RANK": str(r)}).pid
        for r, role in enumerate(["allreduce", "loader"])
    ]
    snap = live_snapshot(1000.0, pids, ["spin", "idle"])
    v = Verdict(t=snap.t, state="stalled", spinning=(0,), suspects=(1,), suspect_pids=(pids[1],))
    rep = write_bundle(tmp_path / "b", snapshots=[snap], verdict=v)
    doc = json.loads((rep.path / "verdict.json").read_text())
    assert doc["culprit_frame"].startswith("wait_for_the_data_loader (blocked.py:")
    assert doc["findings"][0].startswith(f"rank 1 (pid {pids[1]}) is in wait_for_the_data_loader")
    assert [e["pid"] for e in doc["stacks"]] == pids
