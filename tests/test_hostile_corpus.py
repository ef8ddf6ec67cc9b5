"""Hostile recordings through `snapshot`, `snapshot --json`, `check` and `check --json`.

The corpus (tests/hostile_corpus.py, generated here, never committed) holds every example
of issue 11 and, field by field, the damage a file can carry. Every case runs through the
four commands in-process (with a watchdog) and a sample of them as real subprocesses: no
traceback, no hang, exit status 0/1/2, a refusal is one `gputui: FILE...` line, JSON modes
print only strict JSON, and each file is accepted or refused as the reader's rule says.
Also: the demo's hang still raises the alarm when every line appears twice, and time going
backwards is an error naming the file and the line.
"""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import run_cli
from hostile_corpus import corpus, materialize
from hostile_harness import COMMANDS, FAILURES, json_problem, judge, run_main

from gputui.collect.source import demo_path

pytestmark = pytest.mark.hostile

BOUND_S = 20.0  # per run: the slowest case takes well under a second on a loaded 2-core box


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return materialize(corpus(), tmp_path_factory.mktemp("hostile"))


def test_the_corpus_covers_every_example_of_the_issue():
    names = {c.name for c in corpus()}
    issue = {
        "gpu.pstate=overflow",  # OverflowError
        "gpu.events=overflow",
        "pids[]=overflow",
        "proc_mem pid=overflow",
        "procs[].pid=overflow",
        "gpu.util=digits400",  # a 400-digit integer anywhere
        "nesting_5000",  # RecursionError
        "env=string",  # AttributeError
        "dev_zero",  # MemoryError
        "huge_local_world_every_rank",  # check never ended
        "100k_gpu_rows_one_time",  # quadratic reader
        "fifo",  # blocked for ever
        "2M_pids",  # 8 GB in the TUI
        "t_1e20",  # TUI crash
        "name=int",
        "procs.0.state=int",
        "time_backwards",  # check said ok
        "every_line_twice",
        "empty_name",  # --replay '' ran live
    }
    assert issue <= names, issue - names
    assert len(names) > 500


@pytest.mark.parametrize("cmd", COMMANDS, ids=" ".join)
def test_every_hostile_recording_ends_cleanly_in_process(cases, cmd):
    failures = []
    for case, path in cases:
        r = run_main([*cmd, "--replay", path], bound=BOUND_S)
        outcome, detail = judge(case, cmd, r.rc, r.out, r.err, r.hung)
        if outcome in FAILURES:
            failures.append(f"{case.name}: {outcome}: {detail}")
        elif outcome == "clean error" and path and path.isprintable():
            if path not in r.err:
                failures.append(f"{case.name}: the error does not name the file: {r.err!r}")
    assert not failures, "\n".join(failures)


# A sample as real subprocesses, as a user runs them: the issue's worst offenders.
SUBPROCESS_SAMPLE = {
    "fifo": ("snapshot",),
    "dev_zero": ("check", "--json"),
    "nesting_5000": ("snapshot", "--json"),
    "env=string": ("check",),
    "gpu.pstate=overflow": ("snapshot", "--json"),
    "huge_local_world_every_rank": ("check", "--json"),
    "2M_pids": ("snapshot",),
    "gzip_bomb_zeros": ("check",),
    "every_line_twice": ("check", "--json"),
    "empty_name": ("snapshot", "--json"),
    "gpu.util=nan": ("snapshot", "--json"),
}


def test_a_sample_of_the_corpus_as_real_subprocesses(cases):
    failures = []
    picked = [(c, p) for c, p in cases if c.name in SUBPROCESS_SAMPLE]
    assert len(picked) == len(SUBPROCESS_SAMPLE)
    for case, path in picked:
        cmd = SUBPROCESS_SAMPLE[case.name]
        r = run_cli(*cmd, "--replay", path, timeout=BOUND_S + 10)
        outcome, detail = judge(case, cmd, r.returncode, r.stdout, r.stderr, hung=False)
        if outcome in FAILURES:
            failures.append(f"{case.name} {' '.join(cmd)}: {outcome}: {detail}")
    assert not failures, "\n".join(failures)


def test_json_checker_refuses_nan_and_infinity():
    """The check used above can fail: NaN and Infinity are not JSON."""
    assert json_problem(("snapshot", "--json"), '{"a": NaN}')
    assert json_problem(("check", "--json"), '{"a": 1}\n{"a": -Infinity}')
    assert json_problem(("check", "--json"), '{"a": 1}\n{"a": 2}') is None


# ---------------------------------------------------------------- the demo, transformed


def demo_lines() -> list[str]:
    with gzip.open(demo_path(), "rt") as f:
        return f.read().splitlines()


def check_json(path) -> tuple[int, list[dict]]:
    # One host name for every file, so that two files' verdicts compare (the default host
    # of a replay is its file name).
    r = run_main(["check", "--json", "--host", "demo", "--replay", str(path)])
    assert not r.hung and "Traceback" not in r.err, r.err
    return r.rc, [json.loads(x) for x in r.out.splitlines()]


def test_the_demo_hang_still_raises_the_alarm_when_every_line_appears_twice(tmp_path):
    twice = tmp_path / "twice.jsonl"
    twice.write_text("".join(f"{ln}\n{ln}\n" for ln in demo_lines()))
    rc_twice, got = check_json(twice)
    rc, want = check_json(demo_path())
    assert "stalled" in [v["state"] for v in want]
    assert (rc_twice, got) == (rc, want)
    stalls = [v for v in got if v["state"] == "stalled"]
    assert all(v["spinning"] == [0] and v["suspects"] == [1] for v in stalls)


def test_the_demo_with_every_sample_twice_gives_the_same_verdicts(tmp_path):
    lines = demo_lines()  # two GPU lines per sample
    blocks = [lines[i : i + 2] for i in range(0, len(lines), 2)]
    f = tmp_path / "blocks.jsonl"
    f.write_text("".join("\n".join(b + b) + "\n" for b in blocks))
    assert check_json(f) == check_json(demo_path())


def test_the_demo_with_time_going_backwards_is_an_error_naming_file_and_line(tmp_path):
    lines = demo_lines()
    lines[600], lines[900] = lines[900], lines[600]
    f = tmp_path / "backwards.jsonl"
    f.write_text("\n".join(lines) + "\n")
    # Line 601 now holds a later sample's line, so it starts a sample of its own; the line
    # after it is the first to go back in time.
    for cmd in (["check"], ["check", "--json"], ["snapshot"]):
        r = run_main([*cmd, "--replay", str(f)])
        assert r.rc == 2 and r.out == ""
        assert r.err.count("\n") == 1
        assert r.err.startswith(f"gputui: {f}:602: time goes backwards")
