"""Host lists and merged check lines that are hostile (issue 34).

- `--expect @F` with the line `n[1-99999]` 1,000 times (11 KB) took 58 s: an expression is
  now expanded once, and every name made counts against a bound, duplicates included
  (bench/hostlist_cost.py times it; no test here is timed).
- `merge --expect @/etc/shadow` and `fleet @/etc/shadow` printed the file's first line in
  their error: under `sudo gputui` that discloses it. A file that is not a host list is
  refused naming the file and the line, never quoting it.
- `merge` crashed on a `findings` of the wrong type: every key merge reads has a shape; a
  line that does not fit is skipped, with its reason.
"""

from __future__ import annotations

import json

import pytest
from hostile_harness import run_main

from gputui.collect.hostlist import MAX_GENERATED, MAX_HOSTS, expand_hosts, is_host_name

pytestmark = pytest.mark.hostile

SHADOW = (
    "root:$6$Zx9saltsalt$Qk2sEcReThAsHqk2sEcReThAsHqk2sEcReT/:19700:0:99999:7:::\n"
    "daemon:*:19700:0:99999:7:::\n"
    "alice::19700:0:99999:7:::\n"
)
SECRETS = ("root:", "Zx9salt", "Qk2sEcReT", "daemon", "alice", "19700")


def test_the_issues_repeated_line_expands_once(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("n[1-99999]\n" * 1000)
    hosts = expand_hosts(f"@{f}")
    assert len(hosts) == 99_999 and hosts[:2] == ["n1", "n2"] and hosts[-1] == "n99999"


def test_overlapping_expressions_stop_at_the_bound_on_names_made(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("".join(f"n[{i}-99999]\n" for i in range(1, 1001)))
    with pytest.raises(ValueError) as e:
        expand_hosts(f"@{f}")
    line = MAX_GENERATED // 99_990 + 1  # the first line past the bound
    assert str(e.value) == (
        f"{f}: not a host list: line {line} has more than {MAX_GENERATED} names to expand "
        "(duplicates counted)"
    )


def test_more_hosts_than_the_bound_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=f"more than {MAX_HOSTS} hosts"):
        expand_hosts("a[1-60000],b[1-60000]")
    r = run_main(["merge", "--expect", "a[1-60000],b[1-60000]", "-"], bound=60)
    assert r.rc == 2 and r.err == f"gputui: --expect: more than {MAX_HOSTS} hosts\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["merge", "--expect", "@FILE", "LINES"],
        ["fleet", "@FILE", "--", "check"],
        ["--probe-hosts", "@FILE", "--demo"],
    ],
    ids=["merge --expect", "fleet", "dashboard --probe-hosts"],
)
@pytest.mark.parametrize("lead", ["", "node1\nnode[2-3]\n"], ids=["first line", "third line"])
def test_a_file_that_is_not_a_host_list_is_refused_without_quoting_it(tmp_path, argv, lead):
    f = tmp_path / "shadow"
    f.write_text(lead + SHADOW)
    lines = tmp_path / "a.jsonl"
    lines.write_text('{"t": 1, "state": "ok", "host": "node1"}\n')
    argv = [f"@{f}" if a == "@FILE" else str(lines) if a == "LINES" else a for a in argv]
    r = run_main(argv, bound=60)
    assert r.rc == 2 and r.err.count("\n") == 1, r.err
    n = 3 if lead else 1
    assert f"{f}: not a host list: line {n} is not a host name" in r.err, r.err
    assert not any(s in r.err for s in SECRETS), r.err


def test_binary_content_and_a_nested_host_file_are_refused_the_same_way(tmp_path):
    f = tmp_path / "bin"
    f.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe secret\n")
    with pytest.raises(ValueError) as e:
        expand_hosts(f"@{f}")
    assert str(e.value) == f"{f}: not a host list: line 1 is not a host name"
    g = tmp_path / "outer"
    g.write_text(f"node1\n@{f}\n")
    with pytest.raises(ValueError) as e:
        expand_hosts(f"@{g}")
    assert str(e.value).startswith(f"{g}: not a host list: line 2 is not a host name")


def test_a_typed_list_is_the_users_own_and_is_quoted():
    with pytest.raises(ValueError, match="not a host name: 'user::1:2'"):
        expand_hosts("user::1:2")


@pytest.mark.parametrize(
    "name",
    ["node01", "gpu-7-ib.cluster.local", "10.0.0.7", "fe80::1", "alice@node-3", "pod_a-0"],
)
def test_host_names_of_every_form_are_accepted(name):
    assert is_host_name(name) and expand_hosts(name) == [name]


@pytest.mark.parametrize(
    "name",
    ["-oProxyCommand=x", "a:b:c", "root:$6$x", "x" * 300, "a@", "@b", "bad user@h", "a..b,-c"],
)
def test_what_is_not_a_host_name_is_refused(name):
    assert not is_host_name(name)
    with pytest.raises(ValueError):
        expand_hosts(name)


# ---------------------------------------------------------------- merge's check lines


def _ok(host: str, t: float = 1.0) -> dict:
    return {"t": t, "state": "ok", "host": host, "ranks": {"0": 0}}


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("findings", 5, "findings: a number, expected a list"),
        ("findings", [{"x": 1}], "findings[0]: an object, expected a string"),
        ("spinning", "0,1", "spinning: a string, expected a list"),
        ("stacks", [{"pid": [1]}], "stacks[0].pid: a list, expected an integer"),
        ("ranks", {"0": "zero"}, "ranks.<key>: a string, expected an integer"),
        ("wait_share", {"0": 7}, "wait_share.<key>: outside 0..1"),
        ("health", {"gpus": []}, "health.gpus: a list, expected an object"),
        ("since", "yesterday", "since: a string, expected a number"),
        ("missing_ranks", [1, {}], "missing_ranks[1]: an object, expected an integer"),
    ],
)
def test_a_check_line_with_a_field_of_the_wrong_shape_is_skipped_with_its_reason(
    tmp_path, field, value, reason
):
    bad = {**_ok("b"), "state": "stalled", "spinning": [0], field: value}
    f = tmp_path / "lines.jsonl"
    f.write_text(json.dumps(_ok("a")) + "\n" + json.dumps(bad) + "\n")
    r = run_main(["merge", str(f)], bound=60)
    assert r.rc == 0 and "Traceback" not in r.err, r.err
    assert r.err == (
        f"gputui: skipped 1 line(s) that are not check --json output ({f}:2: {reason})\n"
    )
    assert "final: ok: no hang on 1 host(s)" in r.out
