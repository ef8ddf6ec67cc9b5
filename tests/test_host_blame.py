"""Which host a job-wide verdict blames, and what its world probe's answer adds to the verdict.

`merge` and `fleet` blame a host's hardware in two cases: a node reports a sick GPU, or every
GPU that answered spins while a host sent nothing. The verdict then offers the world probe's
bisect over that host and its two nearest healthy neighbours, as a command to run as it is;
`--probe-blamed` runs it (tests/test_host_blame_probe.py runs the real probe).
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from gputui.diagnose.merge.host_blame import neighbours
from gputui.diagnose.merge.host_probe import explain_host_probe, with_host_probe
from gputui.diagnose.merge.join import line_from_json, merge
from gputui.diagnose.merge.merged import merged_to_json

T = 1_795_338_000.0
JOB = "master:10.0.0.1:29500"
XID79 = {"gpus": {"1": {"health": "failed", "reason": "Xid 79: GPU has fallen off the bus"}}}


def line(host: str, state: str = "stalled", **kw):
    d = {"t": T, "state": state, "job_key": JOB, "world_size": 8, "since": T - 20, **kw}
    return line_from_json(d, host)


def spinning(host: str, rank: int, **kw):
    return line(host, spinning=[0], ranks={"0": rank}, **kw)


def test_a_sick_gpu_blames_its_host_and_offers_the_probe_with_two_neighbours():
    lines = [spinning(h, i) for i, h in enumerate("abde")]
    lines.append(spinning("c", 4, health=XID79))
    m = merge(lines, expect="abcde")[-1]
    b = m.blamed_host
    assert b is not None and b.host == "c" and b.source == "sick"
    assert "Xid 79" in b.why
    assert b.neighbours == ("d", "b")  # the next one, then the one before
    assert b.command() == ["gputui", "probe", "--hosts", "c,d,b", "--bisect"]
    assert any("`gputui probe --hosts c,d,b --bisect`" in s for s in m.next_steps)
    assert merged_to_json(m)["blamed_host"]["command"][-2:] == ["c,d,b", "--bisect"]
    assert m.reason.startswith(f"job {JOB}: GPU c:1 failed: Xid 79")
    assert "did not answer" not in m.reason  # the sick GPU says where the culprit is


def test_a_host_silent_while_every_answering_gpu_spins_is_blamed():
    m = merge([spinning(h, i) for i, h in enumerate("abd")], expect="abcd")[-1]
    assert m.silent_hosts == ("c",)
    b = m.blamed_host
    assert b is not None and (b.host, b.source) == ("c", "silent")
    assert b.neighbours == ("d", "b") and "did not answer" in b.why


def test_a_rank_that_does_not_spin_on_a_host_that_answered_blames_no_host():
    """Its stack is the next step (gputui dump), not a probe: a silent host beside it too."""
    lines = [spinning("a", 0), spinning("b", 1), line("d", "ok", ranks={"0": 3})]
    m = merge(lines, expect="abcd")[-1]
    assert m.suspects == ("d:0",) and m.silent_hosts == ("c",)
    assert m.blamed_host is None
    assert not any("--bisect" in s for s in m.next_steps)


def test_a_healthy_job_blames_nothing():
    m = merge([line(h, "ok", ranks={"0": i}) for i, h in enumerate("ab")])[-1]
    assert m.blamed_host is None and "blamed_host" not in merged_to_json(m)


@pytest.mark.parametrize(
    ("host", "hosts", "skip", "want"),
    [
        ("c", "abcde", set(), ("d", "b")),
        ("a", "abcde", set(), ("b", "c")),  # the first: both after it
        ("e", "abcde", set(), ("d", "c")),  # the last: both before it
        ("c", "abcde", {"d"}, ("b", "e")),  # a silent or sick peer is passed over
        ("a", "ab", set(), ("b",)),  # fewer hosts than neighbours
        ("a", "a", set(), ()),
        ("x", "abc", set(), ()),  # not in the list
    ],
)
def test_neighbours_are_the_nearest_healthy_hosts_in_list_order(host, hosts, skip, want):
    assert neighbours(host, list(hosts), skip) == want


def _blamed():
    lines = [spinning(h, i) for i, h in enumerate("abd")]
    lines.append(spinning("c", 4, health=XID79))
    return merge(lines, expect="abcd")[-1]


def _record(**kw):
    rec = {"type": "blamed_host_probe", "host": "c", "hosts": ["c", "d", "b"]}
    rec.update(outcome="done", bad_hosts={}, bad_pairs=[], busy={}, busbw_gbps=1.5)
    return {**rec, **kw}


def test_a_broken_host_joins_the_verdict_first_and_the_next_step_is_to_drain_it():
    found = explain_host_probe(_record(bad_hosts={"c": "fails alone: rank 0 killed"}))
    assert found.hardware
    said = "world probe over c, d, b: host c is broken: fails alone: rank 0 killed"
    assert found.lines == (said,)
    m = with_host_probe(_blamed(), found)
    assert m.findings[0] == found.lines[0]
    assert not any("--bisect" in s for s in m.next_steps)  # the offer is answered
    assert any("scontrol update nodename=c state=drain" in s for s in m.next_steps)


def test_a_broken_link_is_named_by_its_two_hosts():
    found = explain_host_probe(_record(bad_pairs=[["c", "d", "0.2 GB/s (others 11)"]]))
    assert found.hardware
    assert found.lines == ("world probe over c, d, b: the link c<->d fails: 0.2 GB/s (others 11)",)


def test_every_host_and_pair_passing_clears_the_host_and_points_at_the_job():
    found = explain_host_probe(_record(ok=True))
    assert not found.hardware
    assert "every host and host pair passed (all_reduce 1.5 GB/s)" in found.lines[0]
    assert "the cause is in the job" in found.lines[0]
    m = with_host_probe(_blamed(), found)
    assert not any("drain" in s for s in m.next_steps)


def test_a_world_that_fails_only_whole_clears_no_one_and_drains_no_host():
    found = explain_host_probe(_record(ok=False, world_ok=False))
    assert found.hardware and not found.drain  # exit 3, but not c's fault alone
    assert (
        "every host and host pair passes alone, but the whole world of 3 hosts fails"
        in (found.lines[0])
    )
    assert not any("the cause is in the job" in x for x in found.lines)
    m = with_host_probe(_blamed(), found)
    assert not any("drain" in s for s in m.next_steps)


def test_probe_workers_killed_after_the_run_are_said_and_clear_no_one():
    found = explain_host_probe(_record(ok=False, world_ok=True, leftovers={"d": "pid 9"}))
    assert not found.hardware
    assert found.lines == (
        "world probe over c, d, b: probe workers on d did not exit and were killed (pid 9): "
        "a process stuck there in the GPU or the network",
    )


def test_a_broken_link_of_the_blamed_host_drains_it():
    found = explain_host_probe(_record(bad_pairs=[["d", "c", "0.2 GB/s"]]))
    assert found.drain
    assert not explain_host_probe(_record(bad_pairs=[["d", "b", "0.2 GB/s"]])).drain


def test_a_host_whose_gpus_a_job_holds_is_refused_and_says_to_end_the_job_first():
    why = "GPU 0 is in use by pid 77 (Slurm job 4242 rank 3); --force to probe anyway"
    found = explain_host_probe(_record(outcome="refused", busy={"c": why}))
    assert not found.hardware
    assert found.lines[0].startswith(f"the world probe of c is refused: {why}")
    assert "End the job's ranks there first" in found.lines[0]


def test_a_neighbour_it_could_not_test_is_said():
    found = explain_host_probe(_record(busy={"d": "GPU 0 is in use by pid 9"}))
    assert found.lines[-1] == "world probe over c, d, b: d was not tested: GPU 0 is in use by pid 9"


def test_a_probe_that_could_not_run_changes_nothing_but_says_why():
    found = explain_host_probe(_record(outcome="failed", error="ssh is not installed"))
    assert not found.hardware
    assert found.lines == ("the world probe of c could not run: ssh is not installed",)


def _write(tmp_path, lines):
    f = tmp_path / "checks.jsonl"
    f.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return str(f)


def test_merge_without_a_blamed_host_says_so_and_runs_no_probe(tmp_path):
    d = {"t": T, "state": "stalled", "job_key": JOB, "spinning": [0], "ranks": {"0": 0}}
    ok = {"t": T, "state": "ok", "job_key": JOB, "ranks": {"0": 1}, "host": "b"}
    f = _write(tmp_path, [{**d, "host": "a"}, ok])
    r = run_cli("merge", f, "--probe-blamed", "--probe-launcher", "local")
    assert r.returncode == 1, r.stderr
    assert r.stderr == "--probe-blamed: the verdict blames no host's hardware; nothing to probe\n"
    assert "world probe" not in r.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["fleet", "a,b", "--probe-blamed", "--", "dump", "1"], "follows a check"),
        (["fleet", "--launcher", "kubectl", "--probe-blamed", "a,b", "--", "check"], "not kubectl"),
        (["merge", "-", "--probe-blamed", "--probe-launcher", "mpirun"], "invalid choice"),
        (["merge", "-", "--probe-blamed", "--probe-timeout", "-1"], "--probe-timeout"),
    ],
)
def test_bad_probe_options_are_one_line_and_exit_2_before_anything_runs(args, said):
    r = run_cli(*args, timeout=30)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and said in r.stderr, r.stderr


def test_a_real_nccl_hang_watched_as_four_hosts_blames_the_silent_one(tmp_path):
    """4 x H200, one rank per GPU, rank 2 stuck on the CPU; `check --gpus G --host H` on
    GPUs 0, 1 and 3 as hosts a, b and d, host c (GPU 2) silent: its check never ran. The
    merged verdict blames c, offering the probe with d and b (scripts/device/check_blamed_host.sh
    ran it there: refused while the job held the GPUs, c cleared after, c named broken with
    its rank killed)."""
    from conftest import REPO

    data = REPO / "tests" / "data" / "h200x4-blamed-host"
    files = [str(data / f"bh_{h}.jsonl") for h in "abd"]
    r = run_cli("merge", "--json", "--expect", "a,b,c,d", *files)
    assert r.returncode == 1, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["silent_hosts"] == ["c"] and last["unseen_ranks"] == [2]
    blame = last["blamed_host"]
    assert (blame["host"], blame["source"], blame["neighbours"]) == ("c", "silent", ["d", "b"])
    text = run_cli("merge", "--expect", "a,b,c,d", *files).stdout
    assert "blamed host: c (c did not answer" in text
    assert "`gputui probe --hosts c,d,b --bisect`" in text


# ---------------------------------------------------------------- from one node: NCCL RAS


def ras(text: str, ranks: tuple[int, ...] = ()):
    from gputui.diagnose.ranking import Finding, Strength

    return Finding(text, Strength.RAS_BEHIND, "ras", ranks=ranks)


def elsewhere(host: str) -> bool:
    """No address is this node's (the tests' hosts are all other machines)."""
    return False


DEAD3 = "NCCL RAS: rank 3 (10.0.0.2, pid 5151, GPU 1) is dead: unreachable for 60 s (its process exited, or its node is down)."  # noqa: E501


def test_a_rank_ras_calls_dead_on_another_host_blames_that_host():
    from gputui.diagnose.merge.host_blame import ras_blamed

    b = ras_blamed([ras(DEAD3, (3,))], ["10.0.0.1", "10.0.0.2", "10.0.0.3"], "me", elsewhere)
    assert b is not None and (b.host, b.source) == ("10.0.0.2", "ras")
    assert b.neighbours == ("10.0.0.3", "10.0.0.1") and b.why == DEAD3


@pytest.mark.parametrize(
    "text",
    [
        "NCCL RAS: rank 5 (node-b, pid 42, GPU 1) does not answer (stopped, hung hard, or its "
        "node is unreachable).",
        "NCCL RAS: rank 5 (node-b) is dead: unreachable for 60 s (its process exited, or its "
        "node is down).",
        "NCCL RAS: process 42 on node-b (GPU 1) is dead.",
        "NCCL RAS: no answer from process 42 on node-b (GPU 1).",
    ],
)
def test_each_way_ras_says_a_rank_is_gone_names_its_host(text):
    from gputui.diagnose.merge.host_blame import ras_blamed

    b = ras_blamed([ras(text)], [], "node-a", elsewhere)
    assert b is not None and b.host == "node-b"
    assert b.neighbours == ("node-a",)  # no host list: probed against this node
    assert b.command() == ["gputui", "probe", "--hosts", "node-b,node-a", "--bisect"]


def test_ras_blames_no_host_for_a_rank_here_behind_or_explained_by_its_last_words():
    from gputui.diagnose.merge.host_blame import ras_blamed
    from gputui.diagnose.ranking import Finding, Strength

    here = "NCCL RAS: rank 1 (10.0.0.1, pid 7, GPU 1 on this node) is dead: unreachable."
    behind = "NCCL RAS: rank 3 (10.0.0.2, pid 5151, GPU 1) is behind: AllReduce count 3271."
    assert ras_blamed([ras(here, (1,)), ras(behind, (3,))], [], "me", elsewhere) is None
    words = Finding("rank 3 died: CUDA error: an illegal memory access", Strength.RANK_GONE,
                    "lastwords", ranks=(3,))  # fmt: skip
    assert ras_blamed([words, ras(DEAD3, (3,))], [], "me", elsewhere) is None  # the program's fault
    assert ras_blamed([ras(DEAD3, (3,))], [], "10.0.0.2", elsewhere) is None  # this host's name
    assert ras_blamed([ras(DEAD3, (3,))], [], "me", {"10.0.0.2"}.__contains__) is None  # address


def test_a_rank_that_died_here_blames_no_host_though_ras_names_this_nodes_address():
    """Seen on 4 x H200: rank 2 died with a traceback; RAS named it by this node's address,
    and the process sentence, once its pid had left, read like another host's. The process
    is now said once (as the rank), "on this node", and this node's addresses blame nothing."""
    from gputui.diagnose.merge.host_blame import ras_blamed

    rank = "NCCL RAS: rank 2 (192.0.2.2, pid 916, GPU 2 on this node) does not answer."
    proc = "NCCL RAS: no answer from process 916 on 192.0.2.2 (GPU 2)."
    here = {"192.0.2.2"}.__contains__
    assert ras_blamed([ras(rank, (2,)), ras(proc)], [], "vm", here) is None
    assert ras_blamed([ras(proc)], [], "vm", elsewhere) is not None  # as it was


def test_check_probe_blamed_names_the_host_ras_blames_and_the_probe_to_run(monkeypatch):
    """`check` knows no launcher or host list: it says the command, runs nothing."""
    import socket

    from gputui.commands.check_after import After, _host
    from gputui.diagnose.ranking import Finding, Strength
    from gputui.diagnose.verdict import Verdict

    monkeypatch.setattr(socket, "gethostname", lambda: "node-a")
    found = (ras(DEAD3, (3,)), Finding("GPU 0 spins", Strength.NVML, "nvml"))
    v = Verdict(t=1.0, state="stalled", reason="x", ranked=found)
    out = After()
    _host(v, lambda v: {"state": v.state}, out)
    assert out.text == [
        f"--probe-blamed: the verdict blames host 10.0.0.2 ({DEAD3}); probe it against this "
        "node: `gputui probe --hosts 10.0.0.2,node-a --bisect`"
    ]
    (line,) = out.json
    assert line["blamed_host"]["outcome"] == "not run" and line["state"] == "stalled"
    quiet = After()
    _host(Verdict(t=1.0, state="stalled", reason="x", ranked=found[1:]), lambda v: {}, quiet)
    assert quiet.text == ["--probe-blamed: the verdict blames no GPU; nothing to probe"]
