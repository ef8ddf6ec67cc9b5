"""Every command against a driver that hangs or fails: bounded, one line, a true exit status.

A stand-in libnvidia-ml.so.1 (tests/nvml_standin/standin.c, built here) hangs in nvmlInit, in
the reads or in nvmlShutdown, reports every GPU lost, or names a GPU in bytes that are not
UTF-8: failures no real GPU gives on demand. Each command runs as a user runs it, in a
subprocess, and must end within its --timeout + 2 s with NVML's state in one line on stderr
and the documented exit status, leaving no process behind. SIGTERM must end `record` and
`check` within 2 s even when nvmlShutdown never returns.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from nvml_standin.build import REPO, build_standin, gputui_argv, standin_env
from targets.launch import Targets

TIMEOUT = 1  # the --timeout every command gets here
SLACK = 2.0  # what a command may take beyond it: start-up, a py-spy dump, exit
# Commands run side by side, on half the CPUs: a command's time limit is about gputui, not
# about the start-up of seven interpreters fighting for two cores.
PARALLEL = max(1, (os.cpu_count() or 2) // 2)


@pytest.fixture(scope="module")
def nvml_lib() -> Path:
    return build_standin()


@pytest.fixture(scope="module")
def target() -> Iterator[int]:
    """A real process for `dump --job` (and `bundle --pid`) to find and dump."""
    t = Targets()
    p = t.start("loader", lifetime=600)
    yield p.pid
    t.close()


@dataclass
class Run:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    tag: str

    @property
    def last_line(self) -> str:
        lines = self.stderr.strip().splitlines()
        return lines[-1] if lines else ""


def _tagged_processes(tag: str) -> list[int]:
    """Processes still alive that carry this run's tag in their environment."""
    left = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("GPUTUI_TEST_TAG") == tag and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p.pid)
        except psutil.Error:
            continue
    return left


def start(
    nvml_lib: Path, mode: str, *args: str, log: Path | None = None, alone: bool = False
) -> subprocess.Popen:
    env = standin_env(nvml_lib, mode)
    env["GPUTUI_TEST_TAG"] = uuid.uuid4().hex
    if log is not None:
        env["GPUTUI_STANDIN_LOG"] = str(log)
    p = subprocess.Popen(
        gputui_argv(*args, alone=alone),
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    p.tag = env["GPUTUI_TEST_TAG"]  # type: ignore[attr-defined]
    return p


def finish(p: subprocess.Popen, started: float, args: tuple[str, ...]) -> Run:
    """Wait for the command (60 s at most) and time it from `started` to its exit."""
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"gputui {' '.join(args)} did not end within 60 s; stderr: {err}")
    return Run(args, p.returncode, out, err, time.monotonic() - started, p.tag)  # type: ignore[attr-defined]


def run_all(nvml_lib: Path, mode: str, commands: dict[str, tuple[str, ...]]) -> dict[str, Run]:
    """Run the commands side by side (the stand-in's hangs cost wall time, not CPU), each
    timed by its own waiting thread."""
    runs: dict[str, Run] = {}
    failures: list[BaseException] = []
    slots = threading.Semaphore(PARALLEL)

    def one(name: str, args: tuple[str, ...]) -> None:
        with slots:
            try:
                t0 = time.monotonic()
                # check alone: it watches the whole host (a rank of another test beside it,
                # waiting in a rendezvous, is a hang it rightly reports)
                alone = args[0] == "check"
                runs[name] = finish(start(nvml_lib, mode, *args, alone=alone), t0, args)
            except BaseException as e:  # re-raised in the test
                failures.append(e)

    threads = [threading.Thread(target=one, args=item) for item in commands.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    return runs


DURATION = 0.3  # --duration of the commands that watch for a while (check, record)


def commands(tmp: Path, pid: int) -> dict[str, tuple[str, ...]]:
    """The commands a user runs on a node, each with --timeout; `check` and `record` may
    take their --duration on top of it."""
    t = ("--timeout", str(TIMEOUT))
    watch = ("--duration", str(DURATION), "--interval", "0.1", *t)
    return {
        "snapshot": ("snapshot", "--interval", "0.1", *t),
        "snapshot --json": ("snapshot", "--json", "--interval", "0.1", *t),
        "check": ("check", *watch),
        "check --json": ("check", "--json", *watch),
        "record": ("record", str(tmp / "rec.jsonl"), *watch),
        "bundle": ("bundle", "--seconds", "0", "--out", str(tmp / "bundle"), *t),
        "dump --job": ("dump", "--job", str(pid), *t),
    }


# Commands whose stderr holds nothing but the error; the others also say what they do.
QUIET = {"snapshot", "snapshot --json", "check", "check --json", "dump --job"}

HUNG = "NVML did not answer within"
LOST = "GPU 0, 1 cannot be read (NVML: GPU is lost)"
HUNG_MODES = [  # (mode, what the error line must say: one of)
    ("hang_init", [f"{HUNG} {TIMEOUT} s (nvmlInit)"]),
    ("hang_read", [f"{HUNG} {TIMEOUT} s (nvmlDeviceGetUtilizationRates on GPU 0)"]),
    ("hang_shutdown", [f"{HUNG} {TIMEOUT} s (nvmlShutdown)"]),
    ("hang_init,hang_shutdown", [f"{HUNG} {TIMEOUT} s (nvmlInit)"]),
    ("hang_read,hang_shutdown", [f"{HUNG} {TIMEOUT} s (nvmlDeviceGetUtilizationRates on GPU 0)"]),
    ("lost,hang_shutdown", [f"{HUNG} {TIMEOUT} s (nvmlShutdown)", LOST]),
]


def assert_bounded_and_clean(runs: dict[str, Run]) -> None:
    for name, r in runs.items():
        assert "Traceback" not in r.stderr, (name, r.stderr)
        watch = float(r.args[r.args.index("--duration") + 1]) if "--duration" in r.args else 0.0
        budget = TIMEOUT + SLACK + watch
        assert r.wall_s <= budget, (name, round(r.wall_s, 2), r.stderr)
        assert _tagged_processes(r.tag) == [], f"{name} left processes behind"


@pytest.mark.parametrize("mode,says", HUNG_MODES, ids=[m for m, _ in HUNG_MODES])
def test_a_driver_that_does_not_answer_ends_every_command_with_exit_2(
    nvml_lib, target, tmp_path, mode, says
):
    runs = run_all(nvml_lib, mode, commands(tmp_path, target))
    assert_bounded_and_clean(runs)
    for name, r in runs.items():
        assert r.returncode == 2, (name, r.returncode, r.stderr)
        assert r.last_line.startswith("gputui: "), (name, r.stderr)
        assert any(s in r.last_line for s in says), (name, r.last_line)
        if name in QUIET:
            assert len(r.stderr.strip().splitlines()) == 1, (name, r.stderr)


def test_gpus_reported_lost_are_never_ok(nvml_lib, target, tmp_path):
    """Lost GPUs are an error (2) for the commands that read once; `check` watches to the
    end and calls them what they are, sick GPUs (3), in its health lines."""
    runs = run_all(nvml_lib, "lost", commands(tmp_path, target))
    assert_bounded_and_clean(runs)
    for name, r in runs.items():
        if name.startswith("check"):
            assert r.returncode == 3 and r.stderr == "", (name, r.returncode, r.stderr)
            continue
        assert r.returncode == 2, (name, r.returncode, r.stderr)
        assert LOST in r.last_line, (name, r.stderr)
        if name in QUIET:
            assert len(r.stderr.strip().splitlines()) == 1, (name, r.stderr)
    assert "ok:" not in runs["check"].stdout
    assert "health: GPU 0 FAILED: lost (GPU is lost)" in runs["check"].stdout
    assert runs["check"].stdout.splitlines()[-1].startswith("final: sick GPU: ")
    health = json.loads(runs["check --json"].stdout.splitlines()[-1])["health"]
    assert [health["gpus"][i]["health"] for i in ("0", "1")] == ["failed", "failed"]
    gpus = json.loads(runs["snapshot --json"].stdout)["gpus"]
    assert [g["error"] for g in gpus] == ["GPU is lost", "GPU is lost"]
    assert "CANNOT BE READ: GPU is lost" in runs["snapshot"].stdout


def test_a_gpu_lost_while_sampling_is_shown_and_fails_the_check(nvml_lib, tmp_path):
    # Two GPUs read twice (the snapshot's two samples would be 4 reads): lost from the 3rd.
    runs = run_all(
        nvml_lib,
        "lost_after:2",
        {
            "snapshot --json": ("snapshot", "--json", "--timeout", str(TIMEOUT)),
            "check --json": (
                "check",
                "--json",
                "--duration",
                "2",
                "--interval",
                "0.5",
                "--timeout",
                str(TIMEOUT),
            ),
        },
    )
    assert_bounded_and_clean(runs)
    snap = json.loads(runs["snapshot --json"].stdout)
    assert [g["name"] for g in snap["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]  # known at start
    assert all(g["util"] is None and g["error"] == "GPU is lost" for g in snap["gpus"])
    assert snap["gpu_error"].startswith("GPU 0, 1 cannot be read")
    assert runs["snapshot --json"].returncode == 2
    check = runs["check --json"]  # watched to the end: the GPUs lost are sick GPUs (3)
    assert check.returncode == 3 and check.stderr == "", check.stderr
    health = json.loads(check.stdout.splitlines()[-1])["health"]["gpus"]
    assert [health[i]["reason"] for i in ("0", "1")] == ["lost (GPU is lost)"] * 2


def test_a_name_that_is_not_utf8_is_replaced_not_a_traceback(nvml_lib, target, tmp_path):
    runs = run_all(nvml_lib, "bad_name", commands(tmp_path, target))
    assert_bounded_and_clean(runs)
    for name, r in runs.items():
        assert r.returncode == 0, (name, r.returncode, r.stderr)
    gpus = json.loads(runs["snapshot --json"].stdout)["gpus"]
    assert gpus[0]["name"].startswith("NVIDIA H200 \ufffd") and gpus[1]["name"] == "NVIDIA H200"
    assert runs["check"].stdout.splitlines()[-1].startswith("final: ok")


def test_a_hung_library_is_never_shut_down(nvml_lib, tmp_path):
    log = tmp_path / "calls.log"
    p = start(nvml_lib, "hang_read", "snapshot", "--timeout", "1", log=log)
    r = finish(p, time.monotonic(), ("snapshot",))
    assert r.returncode == 2
    calls = log.read_text().split()
    assert calls.count("nvmlDeviceGetUtilizationRates") == 1  # nothing queued behind it
    assert "nvmlShutdown" not in calls


def test_a_healthy_library_is_shut_down(nvml_lib, tmp_path):
    log = tmp_path / "calls.log"
    p = start(nvml_lib, "ok", "snapshot", "--timeout", "1", log=log)
    r = finish(p, time.monotonic(), ("snapshot",))
    assert r.returncode == 0, r.stderr
    assert log.read_text().split()[-1] == "nvmlShutdown"


def test_driver_present_but_nvml_failing_fails_the_check(nvml_lib):
    # The library loads (the user-space driver is there) but nvmlInit fails.
    r = finish(start(nvml_lib, "init_error", "check", "--duration", "5"), time.monotonic(), ())
    assert r.returncode == 2
    assert r.stderr.strip() == "gputui: NVML did not start (Unknown Error); try nvidia-smi"
    assert r.wall_s < 5  # it says so at once, without watching for --duration


@pytest.mark.skipif(
    os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl"),
    reason="this machine has an NVIDIA driver",
)
def test_no_driver_at_all_is_nothing_to_watch(nvml_lib):
    r = finish(start(nvml_lib, "no_driver", "check", "--duration", "0.5"), time.monotonic(), ())
    assert r.returncode == 0, r.stderr
    assert "no GPUs to watch: no NVIDIA driver found (NVML: Driver Not Loaded)" in r.stdout


# ---------------------------------------------------------------- SIGTERM


def _lines(stream) -> queue.Queue[str]:
    q: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            q.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return q


def _wait_for(q: queue.Queue[str], text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            if text in q.get(timeout=left):
                return
        except queue.Empty:
            break
    pytest.fail(f"never saw {text!r}")


def _terminate_and_time(p: subprocess.Popen) -> float:
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        pytest.fail("SIGTERM did not end the process within 10 s")
    return time.monotonic() - t0


@pytest.mark.parametrize("mode", ["hang_shutdown", "hang_read_after:4,hang_shutdown"])
def test_sigterm_ends_record_within_2s_keeping_its_samples(nvml_lib, tmp_path, mode):
    out = tmp_path / "rec.jsonl"
    p = start(nvml_lib, mode, "record", str(out), "--interval", "0.2", "--timeout", "30")
    lines = _lines(p.stderr)
    _wait_for(lines, "recording 2 GPU(s)")
    _until(lambda: out.exists() and len(out.read_text().splitlines()) >= 4, "2 samples written")
    took = _terminate_and_time(p)
    assert took < 2.0, f"record took {took:.1f} s to end after SIGTERM"
    assert p.returncode == 0  # a clean stop: nothing had timed out yet
    assert len(out.read_text().splitlines()) >= 4  # what was written is kept
    assert _tagged_processes(p.tag) == []  # type: ignore[attr-defined]


def _until(cond, what: str, timeout: float = 20) -> None:
    """Wait, bounded, for a condition on a file the recorder flushes once per sample."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(0.02)


def test_sigterm_ends_check_within_2s_with_a_hung_shutdown(nvml_lib):
    p = start(nvml_lib, "hang_shutdown", "check", "--json", "--duration", "60", "--interval", "0.2")
    lines = _lines(p.stdout)
    _wait_for(lines, '"state": "ok"')  # the first verdict: it is sampling
    took = _terminate_and_time(p)
    assert took < 2.0, f"check took {took:.1f} s to end after SIGTERM"
    assert _tagged_processes(p.tag) == []  # type: ignore[attr-defined]
