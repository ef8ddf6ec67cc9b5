"""Per-node `check --json` reports and `gputui merge` (the job-wide verdict from many nodes).

A recording of several GPUs is split into "nodes" with `--gpus` and `--host`, each half is
checked on its own, and the merge must name the stuck rank's node and GPU: the real 2-GPU
demo (`--gpus 0 --host a`, `--gpus 1 --host b`: the suspect is b:1) and a synthetic 8-GPU
job split 4/4. Host lists, silent hosts, STAT-style stack groups and bad input are covered.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import run_cli
from synth import timeline

from gputui.collect.hostlist import expand_hosts, host_from_name
from gputui.collect.source import demo_path, filter_gpus
from gputui.collect.trace.format import TraceWriter
from gputui.diagnose.merge.join import exit_code, line_from_json, merge, stack_groups
from gputui.diagnose.merge.merged import Merged

STALL_END_S = 95.0  # inside the demo's stall_in_loop phase (rank 1 stuck, GPU 1 idle)


def check_lines(*args: str) -> list[dict]:
    r = run_cli("check", "--json", *args)
    assert r.returncode in (0, 1), r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


@pytest.fixture(scope="module")
def demo_until_stall(tmp_path_factory) -> str:
    """The real demo recording, cut at the end of its first stall: its own lines, with no
    `meta` line (like the calibration files), so a replay names it after the file."""
    path = tmp_path_factory.mktemp("demo") / "demo.jsonl.gz"
    with gzip.open(demo_path(), "rt") as f:
        lines = [json.loads(x) for x in f if x.strip()]
    t0 = lines[0]["t"]
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(d) + "\n" for d in lines if d["t"] - t0 <= STALL_END_S)
    return str(path)


def test_check_lines_carry_host_and_the_ranks_of_the_gpus(demo_until_stall):
    lines = check_lines("--replay", demo_until_stall)
    assert all(list(x)[:5] == ["t", "state", "spinning", "suspects", "reason"] for x in lines)
    assert {x["host"] for x in lines} == {"demo"}  # the file's name without extensions
    stalled = [x for x in lines if x["state"] == "stalled"]
    assert stalled and stalled[0]["ranks"] == {"0": 0, "1": 1}
    assert stalled[0]["job_key"] == "master:127.0.0.1:29512" and stalled[0]["world_size"] == 2


def test_one_node_watched_as_two_merges_to_the_stuck_rank_on_b(demo_until_stall, tmp_path):
    a = check_lines("--replay", demo_until_stall, "--gpus", "0", "--host", "a")
    b = check_lines("--replay", demo_until_stall, "--gpus", "1", "--host", "b")
    assert {x["host"] for x in a} == {"a"} and {x["host"] for x in b} == {"b"}
    assert all(x["state"] == "ok" for x in b)  # b alone sees an idle GPU: nothing spins there
    assert a[-1]["state"] == "stalled" and a[-1]["suspects"] == []
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(x) + "\n" for x in a))
    with gzip.open(tmp_path / "b.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(x) + "\n" for x in b)
    r = run_cli("merge", "--json", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl.gz"))
    assert r.returncode == 1, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert list(last)[:5] == ["t", "state", "spinning", "suspects", "reason"]
    assert last["state"] == "stalled" and last["spinning"] == ["a:0"]
    assert last["suspects"] == ["b:1"] and last["suspect_ranks"] == [1]
    assert last["waiting_hosts"] == ["a"] and last["silent_hosts"] == []
    text = run_cli("merge", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl.gz"))
    assert "suspects: b:1 (rank 1)" in text.stdout and text.returncode == 1


def test_expect_names_the_host_that_sent_nothing(demo_until_stall, tmp_path):
    a = check_lines("--replay", demo_until_stall, "--gpus", "0", "--host", "node01")
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(x) + "\n" for x in a))
    r = run_cli("merge", "--json", "--expect", "node[01-03]", str(tmp_path / "a.jsonl"))
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["silent_hosts"] == ["node02", "node03"]
    assert last["unseen_ranks"] == [1]  # world 2, and only rank 0 reported
    assert "silent: node02, node03" in last["reason"]


def write_split(tmp_path: Path, name: str, snaps, gpus: set[int]) -> str:
    path = tmp_path / f"{name}.jsonl"
    w = TraceWriter(path, host=name)  # as `gputui record` on that node would write it
    for s in snaps:
        w.write(filter_gpus(s, frozenset(gpus)))
    w.close()
    return str(path)


def test_an_8_gpu_job_split_4_4_names_the_idle_rank_on_its_node(tmp_path):
    states = ["spin"] * 8
    states[5] = "idle"  # rank 5 is stuck on the CPU
    snaps = list(timeline((3, ["compute"] * 8), (15, states)))
    lo = write_split(tmp_path, "node-a", snaps, {0, 1, 2, 3})
    hi = write_split(tmp_path, "node-b", snaps, {4, 5, 6, 7})
    a, b = check_lines("--replay", lo), check_lines("--replay", hi)
    assert a[-1]["host"] == "node-a" and a[-1]["suspects"] == []
    assert b[-1]["suspects"] == [5] and b[-1]["ranks"]["5"] == 5
    merged = merge([line_from_json(x, "?") for x in a + b])
    last = merged[-1]
    assert last.suspects == ("node-b:5",) and last.suspect_ranks == (5,)
    assert last.spinning == tuple(
        [f"node-a:{i}" for i in range(4)] + ["node-b:4", "node-b:6", "node-b:7"]
    )
    assert last.waiting_hosts == ("node-a",)


def line(host, t, state="ok", **kw):
    return line_from_json({"t": t, "state": state, **kw}, host)


def test_a_node_of_another_job_is_not_a_suspect():
    lines = [
        line("a", 10, "stalled", spinning=[0, 1], job_key="master:x:1", ranks={"0": 0, "1": 1}),
        line("b", 10, job_key="master:x:1", ranks={"0": 2}),
        line("c", 10, job_key="master:other:2", ranks={"0": 0}),
    ]
    m = merge(lines)[-1]
    assert m.suspects == ("b:0",) and m.suspect_ranks == (2,) and m.hosts == 3


def test_nearby_changes_are_one_step_and_distant_ones_are_not():
    lines = [
        line("a", 0),
        line("b", 0.5),
        line("a", 10, "stalled", spinning=[0]),
        line("b", 11, "stalled", spinning=[0]),
    ]
    steps = merge(lines, window=2.0)
    assert [s.state for s in steps] == ["ok", "stalled"]
    assert steps[-1].spinning == ("a:0", "b:0") and steps[-1].waiting_hosts == ("a", "b")


def test_a_stall_that_ends_within_the_window_is_a_step_of_its_own():
    """Nodes that report a stall and its end within one window: coalesced, the stall was
    lost and the merge said ok; it is a step, and the span's worst verdict is a hang."""
    lines = [
        line("a", 0),
        line("a", 10, "stalled", spinning=[0]),
        line("b", 10.5),
        line("a", 11),
    ]
    steps = merge(lines, window=2.0)
    assert [s.state for s in steps] == ["ok", "stalled", "ok"]
    assert steps[1].spinning == ("a:0",) and steps[1].t == 10
    assert exit_code(steps) == 1


def test_the_exit_code_is_the_worst_verdict_seen_over_the_span():
    def step(state: str, sick: tuple[str, ...] = ()) -> Merged:
        return Merged(t=0.0, state=state, spinning=(), suspects=(), reason="", sick=sick)

    assert exit_code([step("ok"), step("stalled"), step("ok")]) == 1
    assert exit_code([step("ok"), step("ok", sick=("a:1 failed: Xid 79",))]) == 3
    assert exit_code([step("ok", sick=("a:1 failed: Xid 79",)), step("hung")]) == 1
    assert exit_code([step("slow"), step("ok")]) == 0


def test_merge_of_the_demos_dead_rank_exits_1_although_it_ends_ok(tmp_path):
    """The demo's second stall (a rank died) is on one check line, cleared 0.7 s later: the
    merge of those lines said "final: ok" with exit 0, where the replay exits 1."""
    lines = check_lines("--demo")
    i = next(k for k, x in enumerate(lines) if x["state"] == "stalled" and "1025" in x["reason"])
    path = tmp_path / "lines.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines[i - 2 : i + 3]))
    text = run_cli("merge", str(path))
    assert text.returncode == 1, text.stdout + text.stderr
    assert "final: ok" in text.stdout and "alarms: 1 (+" in text.stdout, text.stdout
    js = run_cli("merge", "--json", str(path))
    assert js.returncode == 1
    assert [json.loads(x)["state"] for x in js.stdout.splitlines()] == ["ok", "stalled", "ok"]


def test_stacks_are_grouped_across_nodes_stat_style():
    entries = [
        {
            "rank": r,
            "host": f"node-{r // 4:02d}",
            "frame": "step (train.py:44)",
            "collective": "all_reduce",
            "outcome": "done",
        }
        for r in range(64)
        if r != 62
    ] + [
        {
            "rank": 62,
            "host": "node-17",
            "frame": "load_batch (data.py:88)",
            "collective": None,
            "outcome": "done",
        }
    ]
    assert stack_groups(entries) == [
        "ranks 0-61,63 on 16 hosts in all_reduce (train.py:44)",
        "rank 62 on node-17 in load_batch (data.py:88)",
    ]


def test_merged_lines_carry_the_odd_ranks_stack_with_its_host():
    lines = [
        line(
            "a",
            5,
            "stalled",
            spinning=[0],
            stacks=[{"rank": 0, "gpu": 0, "frame": "f (t.py:1)", "collective": "all_reduce"}],
        ),
        line(
            "b",
            5,
            "stalled",
            spinning=[0],
            suspects=[1],
            stacks=[
                {"rank": 2, "gpu": 0, "frame": "f (t.py:1)", "collective": "all_reduce"},
                {"rank": 3, "gpu": 1, "frame": "load (d.py:9)", "collective": None},
            ],
        ),
    ]
    m = merge(lines)[-1]
    # the waiting ranks are one sentence; the odd rank's entry is kept, with its host
    assert [(e["rank"], e["host"]) for e in m.stacks] == [(3, "b")]
    assert m.stack_groups == (
        "ranks 0,2 on 2 hosts in all_reduce (t.py:1)",
        "rank 3 on b in load (d.py:9)",
    )


def test_pdsh_prefixed_lines_and_stray_lines_are_read(tmp_path):
    good = {"t": 1.0, "state": "ok", "spinning": [], "suspects": [], "reason": ""}
    f = tmp_path / "out.txt"
    f.write_text(f"node7: {json.dumps(good)}\nsrun: warning: something\n")
    r = run_cli("merge", "--json", str(f))
    assert r.returncode == 0
    assert json.loads(r.stdout)["hosts"] == 1
    assert "skipped 1 line(s)" in r.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["/nonexistent.jsonl"], "No such file"),
        (["--expect", "node[3-1]", "-"], "--expect"),
        (["-"], "no `gputui check --json` lines"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, said):
    r = run_cli("merge", *args)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_bad_lines_never_crash_the_merge():
    for bad in (
        {"t": "x"},
        {"t": 1, "state": "weird"},
        {"t": 1, "state": "ok", "ranks": [1]},
        {"t": 1, "state": "ok", "spinning": ["a"]},
        [],
        None,
    ):
        with pytest.raises(ValueError):
            line_from_json(bad, "h")


def test_host_lists_expand_like_slurm(tmp_path):
    assert expand_hosts("node[01-03]") == ["node01", "node02", "node03"]
    assert expand_hosts("gpu-[1-2,7]-ib,login") == ["gpu-1-ib", "gpu-2-ib", "gpu-7-ib", "login"]
    assert expand_hosts("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    f = tmp_path / "hosts"
    f.write_text("# the job's nodes\nnode[1-2]\nnode3  # spare\nnode1\n")
    assert expand_hosts(f"@{f}") == ["node1", "node2", "node3"]
    for bad in ("node[1-", "node]", "node[3-1]", "n[0-999999999]", "a b", f"@{tmp_path}/none"):
        with pytest.raises(ValueError):
            expand_hosts(bad)


def test_a_replays_host_is_its_file_name_without_extensions():
    assert host_from_name("/x/node-17.jsonl.gz") == "node-17"
    assert host_from_name("a.jsonl") == "a"


def test_gpus_must_name_a_gpu_of_the_node(demo_until_stall):
    r = run_cli("check", "--replay", demo_until_stall, "--gpus", "4-5")
    assert r.returncode == 2
    assert r.stderr.strip() == "gputui: --gpus 4,5: the recording has GPUs 0, 1"
    r = run_cli("check", "--replay", demo_until_stall, "--gpus", "x")
    assert r.returncode == 2 and "not a GPU list" in r.stderr


def test_binary_noise_is_one_line_and_exit_2(tmp_path):
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes(range(256)) * 2000)
    r = run_cli("merge", str(noise))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "no `gputui check --json` lines in the input" in r.stderr
