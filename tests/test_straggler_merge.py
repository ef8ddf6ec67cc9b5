"""A slow job across nodes: `gputui merge` names the straggler as host:gpu (rank) from each
node's `check --json` wait shares, also when the straggler's node is not the one whose ranks
wait (that node alone only sees its ranks all waiting alike)."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from synth import timeline
from test_merge import check_lines, line, write_split

from gputui.diagnose.merge.join import line_from_json, merge
from gputui.diagnose.merge.merged import merged_to_json


def test_an_8_gpu_job_split_4_4_names_the_straggler_on_its_node(tmp_path):
    states = ["slow_peer"] * 8
    states[5] = "compute"  # rank 5 does more work; the other seven wait for it
    snaps = list(timeline((3, ["idle"] * 8), (20, states)))
    lo = write_split(tmp_path, "node-a", snaps, {0, 1, 2, 3})
    hi = write_split(tmp_path, "node-b", snaps, {4, 5, 6, 7})
    a, b = check_lines("--replay", lo), check_lines("--replay", hi)
    assert a[-1]["state"] == "ok" and "all ranks wait alike" in a[-1]["reason"]
    assert b[-1]["state"] == "slow" and b[-1]["stragglers"] == [5]
    last = merge([line_from_json(x, "?") for x in a + b])[-1]
    assert last.state == "slow" and last.stragglers == ("node-b:5",)
    assert last.straggler_ranks == (5,) and last.suspects == ()
    assert "node-b:5 (rank 5) is the straggler; 7 other GPU(s) wait" in last.reason
    d = merged_to_json(last)
    assert d["stragglers"] == ["node-b:5"] and d["wait_share"]["node-a:0"] == 1.0


def test_a_whole_node_behind_is_named_from_both_nodes_shares():
    """Node b's GPUs all compute (a slow node), node a's all wait: neither node alone names
    a straggler; side by side, node b's GPUs are the stragglers."""
    lines = [
        line("a", 10, job_key="master:x:1", ranks={"0": 0, "1": 1}, wait_share={"0": 0.97, "1": 1}),
        line("b", 10, job_key="master:x:1", ranks={"0": 2, "1": 3}, wait_share={"0": 0, "1": 0}),
        line("c", 10, job_key="master:other:2", ranks={"0": 0}, wait_share={"0": 0}),
    ]
    m = merge(lines)[-1]
    assert m.state == "slow" and m.stragglers == ("b:0", "b:1")
    assert m.straggler_ranks == (2, 3) and m.job == "master:x:1"
    assert "are the stragglers" in m.reason


def test_nodes_that_all_wait_alike_merge_to_ok():
    shares = {"0": 0.7, "1": 0.72}
    lines = [
        line("a", 10, job_key="master:x:1", ranks={"0": 0, "1": 1}, wait_share=shares),
        line("b", 10, job_key="master:x:1", ranks={"0": 2, "1": 3}, wait_share=shares),
    ]
    m = merge(lines)[-1]
    assert m.state == "ok" and m.stragglers == ()


def test_a_slow_line_is_read_and_bad_shares_are_one_clear_error(tmp_path):
    ok = line("a", 1, "slow", stragglers=[0], wait_share={"0": 0.0, "1": 0.9})
    assert ok.state == "ok" and ok.stragglers == (0,) and ok.wait_share == {0: 0.0, 1: 0.9}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"t": 1, "state": "slow", "wait_share": {"0": 7}}) + "\n")
    r = run_cli("merge", str(bad))  # a malformed line is skipped, like any stray line
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "1 other line(s) skipped" in r.stderr and len(r.stderr.splitlines()) == 1
    with pytest.raises(ValueError, match="wait_share: an object with a key of the wrong form"):
        line("a", 1, "slow", wait_share={"x": 0.5})
