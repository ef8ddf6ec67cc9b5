"""The plain command-line modes, run as a user runs them: exit codes, output, one-line errors."""

from __future__ import annotations

import json

import pytest
from conftest import no_gpu_only, run_cli


def one_line_error(r) -> str:
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


@no_gpu_only
def test_snapshot_json_without_a_gpu_lists_host_processes_and_says_why():
    r = run_cli("snapshot", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["gpus"] == []
    assert "driver" in d["gpu_error"] and "--demo" in d["gpu_error"]
    assert d["processes"], "host processes are shown when there is no GPU"
    assert set(d) >= {"gpus", "processes", "jobs"}


def test_snapshot_of_the_demo_shows_both_h200s_and_the_two_ranks():
    r = run_cli("snapshot", "--demo", "--at", "80")
    assert r.returncode == 1, r.stderr  # the moment is a stall: as check says
    assert r.stdout.count("NVIDIA H200") == 2
    assert "worker2.py stall_in_loop" in r.stdout
    d = json.loads(run_cli("snapshot", "--demo", "--json", "--at", "80").stdout)
    assert [g["power_limit_w"] for g in d["gpus"]] == [700.0, 700.0]
    assert sorted(p["rank"] for p in d["processes"]) == [0, 1]
    assert d["jobs"][0]["world_size"] == 2


def test_snapshot_reads_the_raw_calibration_format(tmp_path):
    f = tmp_path / "cal.jsonl"
    f.write_text('{"t": 1, "gpu": 0, "util": 100, "mem_util": 0, "power_w": 122, "pids": [7]}\n')
    d = json.loads(run_cli("snapshot", "--json", "--replay", str(f)).stdout)
    assert d["gpus"][0]["util"] == 100 and d["gpus"][0]["power_limit_w"] is None
    assert d["processes"][0]["pid"] == 7


@pytest.mark.parametrize(
    "args, needle",
    [
        (["snapshot", "--replay", "/nonexistent/trace.jsonl"], "no such file"),
        (["snapshot", "--interval", "0"], "positive"),
        (["snapshot", "--interval", "soon"], "not a number"),
        (["snapshot", "--at", "5"], "--at only applies"),
        (["--speed", "-1"], "positive"),
        (["nosuchcommand"], "invalid choice"),
        (["record"], "required"),
        (["record", "/nonexistent-dir/x.jsonl"], "no such directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    r = run_cli(*args)
    assert r.returncode == 2
    assert needle in one_line_error(r)


def test_at_past_the_end_of_a_recording_shows_its_last_sample_and_says_so():
    """`snapshot --demo --at 9999` gave the last sample in silence."""
    r = run_cli("snapshot", "--demo", "--at", "9999")
    assert r.returncode == 0, r.stderr
    assert r.stderr == (
        "gputui: --at 9999 is past the end of the recording, which lasts 158.5 s: its last "
        "sample is shown\n"
    )
    last = run_cli("snapshot", "--demo", "--at", "158.5")
    assert r.stdout == last.stdout and last.stderr == ""


def test_corrupt_replay_file_is_one_line_and_exit_2(tmp_path):
    f = tmp_path / "corrupt.jsonl"
    f.write_text('{"t": 1, "gpu": 0}\n{oops\n')
    r = run_cli("snapshot", "--replay", str(f))
    assert r.returncode == 2
    assert f"{f}:2: not a JSON line" in one_line_error(r)


def test_record_never_overwrites_a_saved_file(tmp_path):
    f = tmp_path / "keep.jsonl"
    f.write_text("precious\n")
    r = run_cli("record", str(f), "--duration", "1")
    assert r.returncode == 2 and "exists" in one_line_error(r)
    assert f.read_text() == "precious\n"


@no_gpu_only
def test_record_without_a_gpu_says_there_is_nothing_to_record(tmp_path):
    r = run_cli("record", str(tmp_path / "x.jsonl"), "--duration", "1")
    assert r.returncode == 2 and "nothing to record" in one_line_error(r)
    assert not (tmp_path / "x.jsonl").exists()
