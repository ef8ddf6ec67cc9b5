"""Every incident bundle replays to the verdict it was written with.

A bundle's trace.jsonl.gz held the samples but not the evidence the verdict was read from:
`bundle --demo` said "rank 1 (pid 815) is in <module> (worker2.py:37)" while `check --replay
BUNDLE/trace.jsonl.gz` said only that GPU 0 spins, on a host called after the machine that
wrote it. Here every bundle the tests can make is replayed by `gputui check`, run as a user
runs it, and its final verdict must be the bundle's: the demo's, one of each recording in
tests/data, one of a recording `gputui record` wrote against the stand-in libnvidia-ml.so.1
(two ranks of a job on its two GPUs, one waiting in all_reduce and one elsewhere, dumped by
py-spy at the stall), and a live bundle of the same two ranks.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, free_port, no_gpu_only, run_cli
from nvml_standin.build import build_standin, standin_env
from targets.launch import Targets

from gputui.tools.which import find_tool

DATA = REPO / "tests" / "data"
RECORDINGS = sorted([*DATA.glob("*.jsonl.gz"), *DATA.glob("*/*.jsonl.gz")])


def replayed(bundle: Path) -> tuple[str, str, str]:
    """(state, reason, host) of `gputui check --replay BUNDLE/trace.jsonl.gz` at its end."""
    r = run_cli("check", "--replay", str(bundle / "trace.jsonl.gz"))
    assert r.returncode in (0, 1, 3, 4), r.stderr
    head = r.stdout.splitlines()[0]
    host = re.search(r" on (\S+)$", head)
    final = next(ln for ln in r.stdout.splitlines() if ln.startswith("final: "))
    state, _, reason = final[len("final: ") :].partition(": ")
    return state, reason, host.group(1) if host else ""


def written(bundle: Path) -> tuple[str, str]:
    v = json.loads((bundle / "verdict.json").read_text())
    return v["state"], v["reason"]


def assert_replays_to_its_verdict(bundle: Path, host: str) -> None:
    state, reason = written(bundle)
    again = replayed(bundle)
    assert again == (state, reason, host), f"bundle: {state}: {reason}\nreplay: {again}"


def test_the_demos_bundle_replays_to_its_culprit_on_the_recorded_node(tmp_path):
    r = run_cli("bundle", "--demo", "--out", str(tmp_path / "b"))
    assert r.returncode == 1, r.stderr  # a hang's bundle exits as check does
    assert written(tmp_path / "b")[1] == "rank 1 (pid 815) is in <module> (worker2.py:37)"
    assert_replays_to_its_verdict(tmp_path / "b", "demo-h200x2-hang")


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.relative_to(DATA).as_posix())
def test_a_bundle_of_each_recording_replays_to_its_verdict(recording, tmp_path):
    r = run_cli("bundle", "--replay", str(recording), "--out", str(tmp_path / "b"))
    state = written(tmp_path / "b")[0]
    assert r.returncode == (1 if state in ("stalled", "hung") else 0), (state, r.stderr)
    host = json.loads((tmp_path / "b" / "host.json").read_text())["hostname"]
    assert_replays_to_its_verdict(tmp_path / "b", host)


# ---------------------------------------------------------------- record, then bundle; live


@pytest.fixture(scope="module")
def spinning_pair() -> Iterator[dict[str, str]]:
    """Two ranks of one job, real Python processes on the stand-in NVML's two GPUs: rank 0
    waits in `all_reduce` on a GPU that spins, rank 1 sits in `wait_for_the_data_loader` on
    an idle one. Only the stacks name rank 1's line: a replay without them cannot. Yields the
    environment of a gputui that sees them stall."""
    if find_tool("py-spy") is None:
        pytest.skip("py-spy is not installed")
    targets = Targets()
    world = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    try:
        pids = [
            targets.start(role, lifetime=300, env={**world, "RANK": r, "LOCAL_RANK": r}).pid
            for r, role in (("0", "allreduce"), ("1", "loader"))
        ]
        env = standin_env(build_standin(), "spin_gpu:0")
        env["GPUTUI_STANDIN_PIDS"] = ",".join(map(str, pids))
        env["PYTHONPATH"] = str(REPO)
        yield env
    finally:
        targets.close()


def gputui(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_a_recording_that_record_wrote_bundles_and_replays_to_its_verdict(spinning_pair, tmp_path):
    rec = tmp_path / "run.jsonl.gz"  # the default --stall-after (10 s), as bundle judges
    r = gputui(
        spinning_pair,
        "record", str(rec), "--duration", "13", "--interval", "0.5",
    )  # fmt: skip
    assert r.returncode == 1, r.stderr  # it recorded a stall: the worst verdict's code
    assert "record(s)" in r.stderr, r.stderr  # the stacks py-spy took at the stall
    b = tmp_path / "b"
    r = run_cli("bundle", "--replay", str(rec), "--out", str(b))
    assert r.returncode == 1, r.stderr  # the stall it holds: as check says
    state, reason = written(b)
    assert state == "stalled" and "is in wait_for_the_data_loader (blocked.py:" in reason, reason
    host = json.loads((b / "host.json").read_text())["hostname"]
    assert_replays_to_its_verdict(b, host)


@pytest.mark.slow
def test_a_live_bundle_of_a_stall_replays_to_its_verdict(spinning_pair, tmp_path):
    """Live, the bundle dumps the stalled ranks itself: that dump is in its trace too."""
    b = tmp_path / "b"
    r = gputui(spinning_pair, "bundle", "--seconds", "11", "--out", str(b))
    assert r.returncode == 1, r.stderr  # a stall's bundle exits as check does
    v = json.loads((b / "verdict.json").read_text())
    assert v["state"] == "stalled" and "in wait_for_the_data_loader (blocked.py:" in v["reason"]
    assert_replays_to_its_verdict(b, json.loads((b / "host.json").read_text())["hostname"])


@no_gpu_only
def test_a_bundle_of_a_machine_without_gpus_replays_to_its_verdict(tmp_path):
    """Its trace held no sample ("no samples in file", exit 2): each sample is now a `nogpu`
    record, read back as a sample with the host's processes and why there are no GPUs."""
    out = tmp_path / "b"
    made = run_cli("bundle", "--out", str(out))
    assert made.returncode == 0, made.stderr
    assert "replays to this verdict" in made.stderr
    bundled = json.loads((out / "verdict.json").read_text())
    r = run_cli("check", "--replay", str(out / "trace.jsonl.gz"))
    assert r.returncode == 0, r.stderr
    assert "no GPUs on" in r.stdout.splitlines()[0], r.stdout
    final = next(ln for ln in r.stdout.splitlines() if ln.startswith("final: "))
    assert final.startswith("final: ok: no GPUs to watch: "), final
    assert final.removeprefix("final: ok: ") in json.dumps(bundled), (final, bundled)
    # the host processes the last sample showed (the top of the CPU: this machine's own)
    lines = gzip.decompress((out / "trace.jsonl.gz").read_bytes()).decode().splitlines()
    last = [json.loads(ln) for ln in lines if '"type":"nogpu"' in ln][-1]
    snap = run_cli("snapshot", "--replay", str(out / "trace.jsonl.gz"), "--json")
    assert snap.returncode == 0, snap.stderr
    shown = json.loads(snap.stdout)
    assert shown["gpus"] == [] and shown["gpu_error"] == last["error"]
    assert [p["pid"] for p in shown["processes"]] == [p["pid"] for p in last["procs"]] != []
