"""GPU health read through real C calls: the stand-in libnvidia-ml.so.1 (tests/nvml_standin)
raises Xid events, reports ECC errors, a pending row remap, one lost GPU, or refuses an
event set, and each command runs as a user runs it, in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from nvml_standin.build import REPO, build_standin, gputui_argv, standin_env

CHECK = ("check", "--json", "--duration", "1.5", "--interval", "0.25", "--timeout", "2")


@pytest.fixture(scope="module")
def nvml_lib() -> Path:
    return build_standin()


def gputui(
    lib: Path, mode: str, *args: str, log: Path | None = None
) -> subprocess.CompletedProcess:
    env = standin_env(lib, mode)
    if log is not None:
        env["GPUTUI_STANDIN_LOG"] = str(log)
    return subprocess.run(
        gputui_argv(*args, alone=True),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def last_health(r: subprocess.CompletedProcess) -> dict:
    return json.loads(r.stdout.splitlines()[-1])["health"]


def test_an_xid_event_from_nvml_fails_the_gpu_and_check_exits_3(nvml_lib):
    r = gputui(nvml_lib, "xid:1:79", *CHECK)
    assert r.returncode == 3, r.stderr
    h = last_health(r)
    assert [(x["xid"], x["gpu"], x["source"]) for x in h["xids"]] == [(79, 1, "nvml")]
    assert h["xids"][0]["meaning"] == "GPU fell off the bus"
    assert h["gpus"]["1"]["health"] == "failed" and h["gpus"]["0"]["health"] == "ok"


def test_a_program_xid_leaves_the_gpu_ok_and_the_check_passes(nvml_lib):
    """Xid 31 is the program's fault: with no job, the node is healthy (exit 0)."""
    r = gputui(nvml_lib, "xid:0:31", *CHECK)
    assert r.returncode == 0, r.stderr
    h = last_health(r)
    assert [x["xid"] for x in h["xids"]] == [31] and h["xids"][0]["kind"] == "program"
    assert {g["health"] for g in h["gpus"].values()} == {"ok"}


@pytest.mark.parametrize(
    "mode,gpu,reason",
    [
        ("ecc:0:2", "0", "2 uncorrected ECC error(s)"),
        ("remap_pending:1", "1", "row remap pending (a GPU reset applies it)"),
    ],
)
def test_uncorrected_ecc_or_a_pending_remap_is_a_sick_gpu(nvml_lib, mode, gpu, reason):
    r = gputui(nvml_lib, mode, *CHECK)
    assert r.returncode == 3, r.stderr
    assert last_health(r)["gpus"][gpu] | {"counters": None, "na": None} == {
        "health": "degraded",
        "reason": reason,
        "counters": None,
        "na": None,
    }
    snap = gputui(nvml_lib, mode, "snapshot", "--json", "--timeout", "2")
    assert snap.returncode == 0, snap.stderr
    assert json.loads(snap.stdout)["health"]["gpus"][gpu]["reason"] == reason
    text = gputui(nvml_lib, mode, "snapshot", "--timeout", "2")
    assert f"health: GPU {gpu} DEGRADED: {reason}" in text.stdout


def test_one_lost_gpu_is_a_finding_and_the_other_is_still_watched(nvml_lib):
    r = gputui(nvml_lib, "lost_gpu:1", *CHECK)
    assert r.returncode == 3, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    h = lines[-1]["health"]["gpus"]
    assert h["1"]["health"] == "failed" and h["1"]["reason"].startswith("lost")
    assert h["0"]["health"] == "ok" and h["0"]["counters"]["ecc_uncorrected_volatile"] == 0
    assert r.stderr == ""


def test_unsupported_readings_are_na_never_degraded(nvml_lib):
    r = gputui(nvml_lib, "ok", *CHECK)
    assert r.returncode == 0, r.stderr
    g0 = last_health(r)["gpus"]["0"]
    assert g0["health"] == "ok"
    assert g0["na"] == {"retired_pending": "n/a: Not Supported", "nvlink": "n/a: Not Supported"}


def test_an_event_set_that_cannot_be_created_is_said_and_the_rest_works(nvml_lib):
    r = gputui(nvml_lib, "no_events,ecc:1:1", *CHECK)
    assert r.returncode == 3, r.stderr
    h = last_health(r)
    assert any("Xid events from NVML: n/a (Not Supported)" in n for n in h["notes"])
    assert h["gpus"]["1"]["health"] == "degraded"


def test_counters_are_read_every_few_seconds_not_every_sample_and_events_end_first(
    nvml_lib, tmp_path
):
    log = tmp_path / "calls.log"
    r = gputui(nvml_lib, "ok", *CHECK, log=log)
    assert r.returncode == 0, r.stderr
    calls = log.read_text().split()
    samples = calls.count("nvmlDeviceGetUtilizationRates") // 2
    assert samples >= 5
    assert calls.count("nvmlDeviceGetRemappedRows") == 2  # once per GPU, at the first sample
    assert calls.count("nvmlEventSetWait_v2") >= 1
    # the Xid thread freed its set before NVML was shut down, and nothing came after
    assert calls[-2:] == ["nvmlEventSetFree", "nvmlShutdown"]


def test_a_sick_gpu_outside_gpus_does_not_fail_the_check_of_the_others(nvml_lib):
    watched = gputui(nvml_lib, "ecc:1:1", *CHECK, "--gpus", "0")
    assert watched.returncode == 0, watched.stderr
    assert gputui(nvml_lib, "ecc:1:1", *CHECK, "--gpus", "1").returncode == 3


def test_record_writes_the_xid_and_a_replay_judges_it_at_its_time(nvml_lib, tmp_path):
    out = tmp_path / "rec.jsonl"
    r = gputui(nvml_lib, "xid:1:79", "record", str(out), "--duration", "1.5", "--interval", "0.25")
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in out.read_text().splitlines() if '"health"' in x]
    assert any(e["xid"] == 79 for rec in recs for e in rec.get("events", []))
    replay = gputui(nvml_lib, "ok", "check", "--replay", str(out), "--json")
    assert replay.returncode == 3, replay.stderr
    assert [x["xid"] for x in last_health(replay)["xids"]] == [79]
