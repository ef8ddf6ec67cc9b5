"""The first hour, round three (issue 43): what a new user typed, and what each now says.

Each test runs `python -m gputui ...` as a user would (real subprocesses, this machine's
missing driver, the bundled demo recording) and reads what came out.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, no_gpu_only, run_cli

from gputui.collect.source import ReplaySource

DEMO_DOC = (REPO / "docs" / "demo.md").read_text()


# ---------------------------------------------------------------- row 1: no driver, rank vars


@no_gpu_only
def test_check_without_a_driver_says_at_once_what_it_waits_for(spawn):
    """With a process that carries rank variables, a check on a machine without a driver
    watches for a rendezvous: it says so on stderr at once, not after its whole duration."""
    spawn({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555"})
    p = subprocess.Popen(
        [sys.executable, "-m", "gputui", "check", "--duration", "120"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stderr is not None
        line = p.stderr.readline()  # bounded: the check ends after --duration anyway
        running = p.poll() is None
    finally:
        p.kill()
        p.wait(timeout=30)
    assert running, "the line came only when the check had ended"
    assert re.match(
        r"gputui check: no GPUs here; \d+ process(es)? \(pid [\d, .]+\) carry a job's rank "
        r"variables: watching for a rendezvous that never completes for 120 s",
        line,
    ), line


# ---------------------------------------------------------------- row 2: one --gpus rule


@pytest.mark.parametrize(
    "args",
    [["snapshot", "--json"], ["check", "--json"], ["--no-mouse"], ["bundle", "--out"]],
    ids=lambda a: a[0],
)
def test_gpus_that_the_demo_does_not_have_are_one_line_in_every_face(args, tmp_path):
    """snapshot showed both GPUs, check said "this node has", the dashboard "try --demo"."""
    if args[-1] == "--out":
        args = [*args, str(tmp_path / "b")]
    r = run_cli("--demo", *args, "--gpus", "5")
    assert r.returncode == 2, r
    assert r.stderr == "gputui: --gpus 5: the demo recording has GPUs 0, 1\n"
    assert not list(tmp_path.iterdir())  # no bundle written


@pytest.mark.parametrize(
    "args",
    [["check", "--duration", "5"], ["snapshot"], ["bundle", "--out"], ["--no-mouse"]],
    ids=lambda a: a[0],
)
def test_gpus_that_the_node_does_not_have_are_the_same_line_live(args, tmp_path):
    """On a 2-GPU node (the stand-in NVML): snapshot showed nothing, bundle wrote an empty
    bundle, the dashboard drew an empty board; now each says the one line check said."""
    from nvml_standin.build import build_standin, standin_env

    if args[-1] == "--out":
        args = [*args, str(tmp_path / "b")]
    r = run_cli(*args, "--gpus", "5", env=standin_env(build_standin(), "ok"))
    assert r.returncode == 2, r
    assert r.stderr == "gputui: --gpus 5: this node has GPUs 0, 1\n"
    assert not list(tmp_path.iterdir())


def test_snapshot_of_the_demo_shows_only_the_gpus_asked_for():
    r = run_cli("snapshot", "--demo", "--gpus", "1", "--json")
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)
    assert [g["index"] for g in snap["gpus"]] == [1]
    assert {p["pid"] for p in snap["processes"]} <= {815, 553, 1025, 1024} - {814, 1024}


def test_a_recording_names_its_own_gpus(tmp_path):
    r = run_cli("snapshot", "--replay", str(_demo_file()), "--gpus", "7")
    assert r.returncode == 2 and r.stderr == "gputui: --gpus 7: the recording has GPUs 0, 1\n"


def _demo_file() -> Path:
    from gputui.collect.source import demo_path

    return demo_path()


# ---------------------------------------------------------------- row 3: each command's codes


def _codes(command: str) -> dict[int, str]:
    text = run_cli(command, "--help").stdout
    table = text.split("exit codes:", 1)[1]
    return {int(m[1]): m[2] for m in re.finditer(r"^  (\d)  (.+)$", table, re.MULTILINE)}


def test_each_judging_command_lists_only_its_own_exit_codes():
    assert set(_codes("check")) == {0, 1, 2, 3, 4, 5}
    assert set(_codes("merge")) == {0, 1, 2, 3, 5}  # merge has no --fail-on-slow
    assert set(_codes("fleet")) == {0, 1, 2, 3, 5}
    probe = _codes("probe")
    assert set(probe) == {0, 1, 2, 5} and probe[1] == "a pair or a host failed"
    for command in ("merge", "fleet", "probe"):
        assert "--fail-on-slow" not in " ".join(_codes(command).values())


# ---------------------------------------------------------------- row 4: probe without torch


def test_the_local_world_probe_without_torch_is_the_install_hint_not_a_bad_host():
    """As plain `probe` says it (torch hidden here as tests/test_probe_cli.py hides it; the
    CI run without torch runs this module too)."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from gputui.cli import main\n"
        "sys.exit(main(['probe', '--hosts', 'localhost', '--launcher', 'local']))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert r.returncode == 2, r.stdout
    assert r.stderr == "gputui: the probe needs torch: pip install 'gputui[probe]'\n"


# ---------------------------------------------------------------- row 7: one timeline


def _demo_times() -> tuple[float, float, float]:
    """(processes appear, a rank stops, the stall is called), in seconds into the demo,
    measured: the first sample with processes, the first spinning GPU, and the first
    stalled line of `check --demo --json`."""
    from gputui.diagnose.hang.classify import GpuState, classify_gpu

    src = ReplaySource.demo(realtime=False)
    start = src.snaps[src.pos].t
    after = src.snaps[src.pos :]
    procs = next(s.t for s in after if s.processes) - start
    spins = next(s.t for s in after if any(classify_gpu(g) is GpuState.SPINNING for g in s.gpus))
    lines = [json.loads(x) for x in run_cli("check", "--demo", "--json").stdout.splitlines()]
    stall = next(x["t"] for x in lines if x["state"] == "stalled")
    return procs, spins - start, stall - start


def test_help_and_docs_tell_the_demo_on_the_timeline_it_plays():
    procs, stops, stall = _demo_times()
    help_text = " ".join(run_cli("--help").stdout.split())
    m = re.search(
        r"processes appear at (\d+) s; a rank stops at about (\d+) s and the stall is called "
        r"at about (\d+) s",
        help_text,
    )
    assert m, help_text
    said = [float(x) for x in m.groups()]
    assert [round(procs), round(stops), round(stall)] == said, (procs, stops, stall)
    doc = " ".join(DEMO_DOC.split())
    assert f"starts {said[0]:.0f} s before the first job's processes appear" in doc
    assert f"at about {said[1]:.0f} s rank 1 stops entering all_reduce" in doc
    assert f"the first stop comes at about {said[2]:.0f} s" in doc
    assert f"about {said[2]:.0f} s before the stall is called" in doc


# ---------------------------------------------------------------- row 12: whose pids


def test_a_bundle_of_the_demo_says_its_pids_are_the_recorded_nodes(tmp_path):
    out = tmp_path / "b"
    # the demo bundles a hang, and a bundle exits with its verdict's code
    assert run_cli("bundle", "--demo", "--out", str(out)).returncode == 1
    steps = json.loads((out / "verdict.json").read_text())["next_steps"]
    dumps = [s for s in steps if "gputui dump" in s]
    assert dumps and all(
        s.startswith("On demo-h200x2-hang (the recorded node; its pids are not this machine's)")
        for s in dumps
    ), steps


# ---------------------------------------------------------------- row 13: typos


def test_a_mistyped_command_gets_a_suggestion():
    r = run_cli("chek")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert "invalid choice: 'chek'" in r.stderr and "did you mean check?" in r.stderr
    far = run_cli("xyzzy")
    assert far.returncode == 2 and "did you mean" not in far.stderr


def test_an_option_of_another_command_does_not_apply_as_the_docs_say():
    r = run_cli("dump", "--demo", "1")
    assert r.stderr == (
        "gputui dump: error: --demo does not apply to `gputui dump` (see gputui dump --help)\n"
    )
    assert "--demo does not apply" in DEMO_DOC
    typo = run_cli("check", "--demo", "--jsno")
    assert "unrecognized arguments: --jsno" in typo.stderr


# ---------------------------------------------------------------- H7: an ASCII stdout


@pytest.mark.parametrize(
    "env",
    [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}],
    ids=["PYTHONIOENCODING=ascii", "LC_ALL=C"],
)
def test_an_ascii_stdout_gets_the_verdicts_exit_code_and_readable_text(env):
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LC_ALL")}
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "check", "--demo"],
        capture_output=True,
        cwd=REPO,
        env={**environ, **env},
        timeout=120,
    )
    assert r.returncode == 1, r.stderr  # the demo's hang, not 5 (a crash)
    assert b"internal error" not in r.stderr
    text = r.stdout.decode("ascii")  # every byte ASCII
    assert "spinning GPU 0 - suspect GPU 1 (pid 815)" in text  # "·" as "-"
    assert "final: ok" in text


# ---------------------------------------------------------------- row 9: TERM=dumb


def test_a_dumb_terminal_is_refused_in_one_line_before_any_escape():
    """Run in a real pseudo-terminal (so stdin, stdout and stderr are terminals) with
    TERM=dumb: one line and exit 2, and no escape sequence written first."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: gputui on the pty
        os.chdir(REPO)
        os.execve(
            sys.executable,
            [sys.executable, "-m", "gputui", "--demo"],
            {**os.environ, "TERM": "dumb"},
        )
    out = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the pty: it has exited
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 2, out
    assert b"\x1b" not in out, out
    assert (
        out.decode()
        .replace("\r\n", " ")
        .startswith(
            "gputui: the dashboard needs a terminal that can move the cursor, and TERM=dumb cannot"
        )
    )
