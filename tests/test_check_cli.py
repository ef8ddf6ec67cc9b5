"""`gputui check` as a health check calls it: JSON lines and the exit status."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import no_gpu_only, run_cli
from synth import timeline

from gputui.collect.trace.format import TraceWriter

TRACE = str(Path(__file__).parent / "data" / "h200x2-trace.jsonl.gz")


def write(path: Path, *segments) -> str:
    w = TraceWriter(path)
    for s in timeline(*segments):
        w.write(s)
    w.close()
    return str(path)


def test_replaying_the_recording_prints_each_change_and_ends_ok():
    r = run_cli("check", "--replay", TRACE, "--json")
    assert r.returncode == 1, r.stderr  # it ends ok, but held two stalls: the worst seen
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["state"] for x in lines] == ["ok", "stalled", "ok", "stalled", "ok"]
    for x in lines:
        assert list(x)[:5] == ["t", "state", "spinning", "suspects", "reason"]
    stalls = [x for x in lines if x["state"] == "stalled"]
    assert all(x["spinning"] == [0] and x["suspects"] == [1] for x in stalls)


def test_a_trace_that_ends_hung_exits_1(tmp_path):
    path = write(tmp_path / "hung.jsonl.gz", (3, ["compute", "compute"]), (70, ["spin", "idle"]))
    r = run_cli("check", "--replay", path, "--json")
    assert r.returncode == 1
    states = [json.loads(x)["state"] for x in r.stdout.splitlines()]
    assert states == ["ok", "stalled", "hung"]


def test_the_human_summary_names_the_suspect_and_the_next_steps(tmp_path):
    path = write(tmp_path / "stall.jsonl", (15, ["spin", "idle"]))
    r = run_cli("check", "--replay", path)
    assert r.returncode == 1
    assert "suspect GPU 1 (pid 1001)" in r.stdout
    assert "next steps:" in r.stdout and "TORCH_NCCL_ASYNC_ERROR_HANDLING" in r.stdout


def test_windows_can_be_set_on_the_command_line(tmp_path):
    path = write(tmp_path / "short.jsonl", (6, ["spin", "idle"]))
    assert run_cli("check", "--replay", path).returncode == 0
    assert run_cli("check", "--replay", path, "--stall-after", "4").returncode == 1


def test_help_shows_the_exit_code_table():
    r = run_cli("check", "--help")
    assert r.returncode == 0
    assert "exit codes:\n  0  healthy" in r.stdout and "  1  a hang" in r.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    for args in (
        ["--replay", str(bad)],
        ["--replay", str(tmp_path / "missing.jsonl")],
        ["--replay", TRACE, "--stall-after", "20", "--hang-after", "5"],
        ["--replay", TRACE, "--duration", "-1"],
    ):
        r = run_cli("check", *args)
        assert r.returncode == 2, args
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@no_gpu_only
def test_without_gpus_a_live_check_is_ok_and_says_why():
    r = run_cli("check", "--duration", "1", "--interval", "0.5")
    assert r.returncode == 0
    assert "no GPUs to watch" in r.stdout


def test_a_text_line_is_printed_when_what_it_says_changes():
    """5 of 15 lines of `check --demo` said what the line before said (the JSON lines
    differ in job keys and ranks, the text does not): each text line now says something new,
    and every change of state is still there."""
    r = run_cli("check", "--demo")
    assert r.returncode == 1, r.stderr
    said: list[str] = []  # each entry: its first line without the time, and the lines under it
    for ln in r.stdout.splitlines()[1:]:
        if ln.startswith("+"):
            said.append(ln.split(" s  ", 1)[1])
        elif ln.startswith(" ") and said:
            said[-1] += "\n" + ln
        else:
            break  # final: ...
    repeats = [b for a, b in zip(said, said[1:], strict=False) if a == b]
    assert not repeats, r.stdout
    states = [s.split()[0] for s in said]
    assert states == ["OK", "STALLED", "STALLED", "OK", "OK", "STALLED", "OK", "OK"]
    js = run_cli("check", "--demo", "--json")
    assert len(js.stdout.splitlines()) > len(said)  # --json keeps every change of the keys
