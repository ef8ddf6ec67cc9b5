"""Every CLI mode with a reader that stops reading: quiet, and the mode's own exit status.

`gputui check --demo --json | head -1` used to end in a BrokenPipeError traceback and exit 1,
and then in exit 0 whatever the verdict (issue 43: a hang read as healthy by `set -o
pipefail`). Here each mode writes into a pipe whose read end is already closed (the first
write fails, as after `head -1` has gone), and once into a real `head -1`. No traceback,
nothing from the interpreter's exit ("Exception ignored ..."), and the status the mode gives
with a reader to the end: check's verdict (1 for the demo's hang), 2 for an error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from conftest import REPO
from nvml_standin.build import build_standin, standin_env
from targets.launch import Targets

from gputui.tools.which import find_tool


@pytest.fixture(scope="module")
def loader() -> Iterator[int]:
    t = Targets()
    yield t.start("loader", lifetime=600).pid
    t.close()


def closed_stdout(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """Run `gputui ARGS` with stdout a pipe nobody reads any more."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(
            [sys.executable, "-m", "gputui", *args],
            stdin=subprocess.DEVNULL,
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
            timeout=timeout,
        )
    finally:
        os.close(w)


def assert_quiet(r: subprocess.CompletedProcess, status: int = 0) -> None:
    assert "Traceback" not in r.stderr, r.stderr
    assert "Exception ignored" not in r.stderr, r.stderr
    assert "BrokenPipe" not in r.stderr, r.stderr
    assert r.returncode == status, (r.returncode, r.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["snapshot", "--help"],
        ["snapshot", "--demo"],
        ["snapshot", "--demo", "--json"],
        ["snapshot", "--interval", "0.1"],
        ["check", "--demo"],
        ["check", "--demo", "--json"],
        ["check", "--duration", "0.2", "--interval", "0.1"],
    ],
    ids=" ".join,
)
def test_a_closed_stdout_ends_the_mode_quietly_with_its_own_status(args):
    with open(os.devnull, "w") as sink:
        read = subprocess.run(
            [sys.executable, "-m", "gputui", *args], stdout=sink, cwd=REPO, timeout=120
        )
    assert_quiet(closed_stdout(*args), status=read.returncode)
    if args[:2] == ["check", "--demo"]:
        assert read.returncode == 1  # the demo holds a hang: not read as healthy


def test_an_error_told_on_stderr_keeps_exit_2(tmp_path):
    r = closed_stdout("snapshot", "--replay", str(tmp_path / "missing.jsonl"))
    assert_quiet(r, status=2)
    assert r.stderr.startswith("gputui: ") and len(r.stderr.splitlines()) == 1


@pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")
@pytest.mark.parametrize("extra", [[], ["--json"], ["--job"]], ids=["text", "json", "job"])
def test_dump_with_a_closed_stdout_is_quiet(loader, extra):
    assert_quiet(closed_stdout("dump", *extra, str(loader)))


def test_bundle_with_a_closed_stdout_still_writes_the_bundle(tmp_path):
    out = tmp_path / "b"
    # the demo holds a hang: the bundle exits with its verdict's code (1), stdout closed or not
    assert_quiet(closed_stdout("bundle", "--demo", "--out", str(out)), status=1)
    assert (out / "README.txt").exists()


def test_record_with_a_closed_stdout_records(tmp_path):
    env = standin_env(build_standin(), "ok")
    out = tmp_path / "rec.jsonl"
    r = closed_stdout("record", str(out), "--duration", "0.3", "--interval", "0.1", env=env)
    assert_quiet(r)
    assert len(out.read_text().splitlines()) >= 2


def test_probe_with_a_closed_stdout_is_quiet():
    pytest.importorskip("torch")
    r = closed_stdout("probe", "--backend", "gloo", "--cpu", "2", "--size", "1M")
    assert_quiet(r)


def test_check_json_into_head_1_is_quiet_and_exits_with_the_verdict(tmp_path):
    """The pipeline of the issue, with a real `head`: the first line, then the run goes on
    into /dev/null and exits 1, the demo's hang."""
    gputui = subprocess.Popen(
        [sys.executable, "-m", "gputui", "check", "--demo", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert gputui.stdout is not None and gputui.stderr is not None
    head = subprocess.run(["head", "-1"], stdin=gputui.stdout, capture_output=True, timeout=60)
    gputui.stdout.close()  # only head reads it now
    err = gputui.stderr.read().decode()
    gputui.wait(timeout=60)
    gputui.stderr.close()
    assert json.loads(head.stdout)["state"] == "ok"  # the first verdict came through
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert gputui.returncode == 1
