"""Every face shows the verdict's headline (the strongest evidence), and every command that
judges exits with the worst verdict it saw (gputui/diagnose/exitcodes.py).

The recordings are real: the demo (a 2 x H200 hang with the real py-spy dumps of its ranks)
and tests/data's shared-GPU trace. Covers: `snapshot` of a replay at a stalled sample says
the headline (text and JSON); `bundle`'s summary says it; `merge` of nodes' lines leads with
the odd rank named as host:rank, and exits 1 when a stall was seen even if it cleared; a
`check` replay of the shared-GPU recording keeps naming the culprit in its headline.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from conftest import run_cli

from gputui.collect.source import ReplaySource
from gputui.collect.trace.format import TraceWriter
from gputui.diagnose.merge.join import line_from_json, merge

CULPRIT = "rank 1 (pid 815) is in <module> (worker2.py:37)"
STALLED_AT_S = 80.0  # into the demo: its first stall, after the dump of its ranks
SHARED = Path(__file__).parent / "data" / "h100-shared-gpu-stuck.trace.jsonl.gz"


def test_snapshot_of_a_replay_at_a_stall_says_the_headline():
    r = run_cli("snapshot", "--demo", "--at", str(STALLED_AT_S))
    assert r.returncode == 1, r.stderr  # a stall: never 0 on any face
    assert r.stdout.splitlines()[0] == f"verdict: STALLED: {CULPRIT}"  # the first line read
    r = run_cli("snapshot", "--demo", "--at", str(STALLED_AT_S), "--json")
    v = json.loads(r.stdout)["verdict"]
    assert v["reason"] == CULPRIT and v["culprit_frame"] == "<module> (worker2.py:37)"
    assert v["ranked"][0]["strength"] == "culprit_line"


def test_a_healthy_snapshot_has_no_verdict_line():
    r = run_cli("snapshot", "--demo", "--at", "1")
    assert r.returncode == 0 and "verdict:" not in r.stdout
    d = json.loads(run_cli("snapshot", "--demo", "--at", "1", "--json").stdout)
    assert d["verdict"]["state"] == "ok"  # scripts always find the moment's verdict


def test_the_bundle_summary_says_the_headline(tmp_path):
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
    assert r.returncode == 1, r.stderr  # a stall's bundle exits as check does
    first, second = r.stdout.splitlines()[:2]
    assert first.startswith("bundle written to ")
    assert second == f"verdict: STALLED: {CULPRIT}"


def node(host, t, state="ok", **kw):
    return line_from_json({"t": t, "state": state, **kw}, host)


def test_merge_leads_with_the_odd_rank_named_host_colon_rank():
    reduce = {"frame": "step (t.py:1)", "collective": "all_reduce", "outcome": "done"}
    lines = [
        node(
            "a",
            5,
            "stalled",
            spinning=[0, 1],
            stacks=[{"rank": 0, **reduce}, {"rank": 1, **reduce}],
        ),
        node(
            "b",
            5,
            "stalled",
            spinning=[0],
            suspects=[1],
            stacks=[
                {"rank": 2, **reduce},
                {"rank": 3, "frame": "load (d.py:9)", "collective": None, "outcome": "done"},
            ],
        ),
    ]
    m = merge(lines)[-1]
    assert m.reason.startswith(
        "odd one out: b:3 in load (d.py:9), while ranks 0-2 are in all_reduce (t.py:1); "
    ), m.reason


def test_merge_exits_with_the_worst_verdict_seen_even_if_it_cleared(tmp_path):
    f = tmp_path / "lines.txt"
    stalled = {"t": 10.0, "state": "stalled", "spinning": [0], "suspects": [1], "reason": "x"}
    ok = {"t": 30.0, "state": "ok", "spinning": [], "suspects": [], "reason": ""}
    f.write_text(f"a: {json.dumps(stalled)}\na: {json.dumps(ok)}\n")
    r = run_cli("merge", "--json", str(f))
    assert [json.loads(x)["state"] for x in r.stdout.splitlines()] == ["stalled", "ok"]
    assert r.returncode == 1, r.stderr


def test_a_replay_of_the_shared_gpu_recording_keeps_naming_the_culprit():
    r = run_cli("check", "--replay", str(SHARED), "--json")
    assert r.returncode == 1, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    framed = [x for x in lines if x.get("culprit_frame")]
    assert framed, [x["reason"] for x in lines]
    last = framed[-1]
    # The culprit's line leads; RAS and the flight recorder agree below it, then NVML.
    assert last["reason"] == "rank 1 (pid 463) is in load_next_batch_stuck (multi_worker.py:192)"
    assert [(f["strength"], f["source"]) for f in last["ranked"]] == [
        ("culprit_line", "stacks"),
        ("ras_behind", "ras"),
        ("ras_behind", "flightrec"),
        ("nvml", "nvml"),
        ("context", "stacks"),
    ]
    with gzip.open(SHARED, "rt") as fh:  # the recording carries the real evidence records
        assert any('"type": "stacks"' in ln or '"type":"stacks"' in ln for ln in fh)
