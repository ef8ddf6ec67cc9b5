"""The cause, not the symptom: every thread, every child, and progress that needs proof, on
a real 2-rank torch.distributed job (gloo on the CPU, tests/targets/cause_rank.py) with
`gputui check` run as a person runs it, against the stand-in libnvidia-ml.so.1 (GPU 0
spins: rank 0 waits in all_reduce for rank 1, whose GPU idles).

- rank 1's side thread `stats` holds the GIL in a regex that never ends; its main thread
  cannot return from all_reduce: the thread, its function and line lead, exit 1 (it was
  "busy: works in native code under all_reduce", exit 0);
- rank 1 spins in a one-line loop polling a flag: "spins in poll_ready (...), nothing
  advances", exit 1, never busy;
- rank 1's DataLoader worker 1 blocks in its dataset's fetch_record: the worker is named,
  its pid, role and frame (it was the rank's `for batch in loader` line and `Queue.get`);
- the worker is killed with SIGKILL: told as this node's, with the worker's pid;
- rank 1 writes a checkpoint with torch.save while NCCL RAS (a real socket speaking RAS's
  JSON, tests/ras_server.py) names it behind: never stalled, at any sample, exit 0.

Each prints the first line that names the cause and its time after the spin's onset.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import free_port
from nvml_standin.build import REPO, build_standin, standin_env
from ras_server import ras_server
from test_early_live import fake_nccl, ras_answer  # noqa: F401 - the fixture, shared

from gputui.tools.which import find_tool

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed"),
    pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed"),
]

RANK = Path(__file__).parent / "targets" / "cause_rank.py"


class Job:
    """Two ranks of cause_rank.py; their output goes to one shared file, as `srun -o`."""

    def __init__(
        self, tmp: Path, role: str, env: dict[str, str] | None = None, extra: tuple[str, ...] = ()
    ) -> None:
        self.out = tmp / "job.out"
        self.procs: list[subprocess.Popen[bytes]] = []
        base = {
            **os.environ,
            **(env or {}),
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(free_port()),
        }
        self.key = f"master:127.0.0.1:{base['MASTER_PORT']}"  # check --json's job_key
        with open(self.out, "ab") as shared:
            for rank in (0, 1):
                argv = [sys.executable, str(RANK), role, "--lifetime", "120"]
                argv += ["--path", str(tmp / "ckpt.pt"), *extra]
                env_r = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}
                self.procs.append(
                    subprocess.Popen(argv, env=env_r, cwd=tmp, stdout=shared, stderr=shared)
                )
        deadline = time.monotonic() + 90
        while not all(f"ready {p.pid}" in self.out.read_text() for p in self.procs):
            assert time.monotonic() < deadline, self.out.read_text()[-2000:]
            time.sleep(0.05)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def check(self, *args: str, alive_only: bool = False) -> tuple[int, list[dict], str]:
        r = subprocess.run(
            self.check_argv(*args),
            env=self.check_env(alive_only),
            capture_output=True,
            text=True,
            timeout=150,
        )
        return r.returncode, [json.loads(x) for x in r.stdout.splitlines()], r.stderr

    def check_argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "gputui", "check", "--json", *args]

    def check_env(self, alive_only: bool = False) -> dict[str, str]:
        """The stand-in NVML lists the ranks' pids on GPUs 0, 1; `alive_only`: only the live
        ones, as real NVML does (a process that exited leaves its GPU's list)."""
        env = standin_env(build_standin(), "spin_gpu:0")
        pids = [p.pid for p in self.procs if p.poll() is None] if alive_only else self.pids
        env["GPUTUI_STANDIN_PIDS"] = ",".join(map(str, pids))
        env["PYTHONPATH"] = str(REPO)
        return env

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)


@pytest.fixture
def job(tmp_path: Path) -> Iterator:
    made: list[Job] = []

    def start(role: str, env: dict[str, str] | None = None, extra: tuple[str, ...] = ()) -> Job:
        made.append(Job(tmp_path, role, env, extra))
        return made[-1]

    yield start
    for j in made:
        j.close()


def first_naming(lines: list[dict], pattern: str) -> dict:
    """The first line whose headline matches `pattern`; its time after the onset is printed."""
    hit = next((x for x in lines if re.search(pattern, x["reason"])), None)
    assert hit is not None, [(x["state"], x["reason"][:100]) for x in lines]
    print(f"+{hit['t'] - hit['since']:.1f} s after the onset: {hit['reason']}")
    return hit


def test_a_side_thread_holding_the_gil_is_the_culprit_not_a_busy_rank(job):
    j = job("gil")
    code, lines, err = j.check("--duration", "15")
    assert code == 1, (err, [x["reason"] for x in lines])
    assert not any(x["state"] == "busy" for x in lines), [x["reason"] for x in lines]
    hit = first_naming(lines, r"thread `stats`")
    assert re.fullmatch(
        r"rank 1: thread `stats` holds the GIL in parse_record \(cause_rank\.py:\d+\); "
        r"its main thread cannot leave all_reduce",
        hit["reason"],
    ), hit["reason"]
    last = lines[-1]
    assert last["culprit_frame"].startswith("parse_record (cause_rank.py:"), last
    mine = next(s for s in last["stacks"] if s["rank"] == 1)
    assert mine["outcome"] == "done" and "threads" in mine, mine
    holder = mine["threads"][0]  # every thread, the holder first
    assert holder["name"] == "stats" and "gil" in holder["status"], mine["threads"]
    assert holder["stack"][1].startswith("parse_record (cause_rank.py:")


def test_a_one_line_spin_polling_a_flag_is_a_hang_not_busy(job):
    j = job("poll")
    code, lines, err = j.check("--duration", "15")
    assert code == 1, (err, [x["reason"] for x in lines])
    assert not any(x["state"] == "busy" for x in lines), [x["reason"] for x in lines]
    judged = next(r for r in lines[-1]["progress"]["ranks"] if r["pid"] == j.pids[1])
    assert judged["advancing"] is False
    if judged["cores"] < 0.25:
        # On a CI box shared with five other test workers the loop once got under a
        # quarter of a core: by the numbers it burns no CPU, and the stacks name its line.
        hit = first_naming(lines, r"poll_ready")
        assert hit["reason"].startswith(f"rank 1 (pid {j.pids[1]}) is in poll_ready"), hit
        return
    hit = first_naming(lines, r"spins in")
    assert re.fullmatch(
        r"rank 1 spins in poll_ready \(cause_rank\.py:\d+\), [\d.]+ cores?, nothing advances",
        hit["reason"],
    ), hit["reason"]


def test_a_dataloader_worker_stuck_in_its_dataset_is_named_not_the_ranks_queue_get(job):
    j = job("loader")
    code, lines, err = j.check("--duration", "15")
    assert code == 1, (err, [x["reason"] for x in lines])
    hit = first_naming(lines, r"DataLoader worker")
    m = re.fullmatch(
        r"DataLoader worker 1 of rank 1 \(pid (\d+)\) is stuck in fetch_record "
        r"\(cause_rank\.py:\d+\); rank 1 waits for it at main \(cause_rank\.py:\d+\)",
        hit["reason"],
    )
    assert m is not None, hit["reason"]
    mine = next(s for s in lines[-1]["stacks"] if s["rank"] == 1)
    assert "children" in mine, mine
    workers = {c["role"]: c for c in mine["children"]}
    assert set(workers) == {"DataLoader worker 0", "DataLoader worker 1"}, mine["children"]
    assert workers["DataLoader worker 1"]["pid"] == int(m.group(1))
    stack = workers["DataLoader worker 1"]["stack"]
    assert stack and stack[0].startswith("fetch_record (cause_rank.py:"), mine["children"]
    assert lines[-1]["culprit_frame"].startswith("fetch_record (cause_rank.py:")
    # `gputui dump PID` shows the rank's children after its own threads.
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "dump", "--json", str(j.pids[1])],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    (res,) = json.loads(r.stdout)["results"]
    kids = {c["role"]: c for c in res["children"]}
    assert kids["DataLoader worker 1"]["pid"] == int(m.group(1)), res["children"]


def worker_death(text: str) -> tuple[int, str]:
    """The worker's pid and why its rank died, as torch told it in the rank's output: torch
    names the signal (SIGKILL here) or, when its status check finds the worker reaped first,
    only says it "exited unexpectedly" (both seen in live runs; which one is torch's race)."""
    from gputui.diagnose.hang.children import killed_child

    got = killed_child(text)
    assert got is not None, text[-2000:]
    pid, sig = got
    if sig is None:
        return pid, (
            f"its DataLoader worker (pid {pid}) exited unexpectedly on this node; torch did not "
            "say how (a worker killed by the OOM killer often reads so: see `dmesg`)"
        )
    assert sig == "SIGKILL (signal 9)", text[-2000:]
    return pid, (
        f"its DataLoader worker (pid {pid}) was killed by SIGKILL (signal 9) on this node, "
        "as the OOM killer does (see `dmesg`)"
    )


def test_a_dataloader_worker_killed_by_sigkill_is_told_on_this_node(job):
    from gputui.diagnose.hang.children import killed_child_cause

    j = job("loader-kill")
    assert j.procs[1].wait(timeout=60) != 0  # the rank dies of its worker's death
    text = j.out.read_text()
    _, why = worker_death(text)
    assert killed_child_cause(text) == why
    # Dead before gputui started: NVML lists no process of local rank 1; its words are in
    # the output its peer still holds.
    code, lines, err = j.check("--duration", "13", alive_only=True)
    assert code == 1, (err, [x["reason"] for x in lines])
    said = [x["reason"] for x in lines] + [f for x in lines for f in x.get("findings", [])]
    assert not any("on another node" in s for s in said), said
    hit = first_naming(lines, r"DataLoader worker")
    assert hit["state"] in ("stalled", "hung")
    assert re.fullmatch(rf"rank 1 died(?: [\w ]+ ago)?: {re.escape(why)}", hit["reason"]), hit[
        "reason"
    ]


def test_a_dataloader_worker_killed_while_gputui_watches_is_why_its_rank_died(job, tmp_path):
    """The worker is SIGKILLed (as the OOM killer does) once `check` watches the job: the
    rank's death is told by its worker's, on this node, with the worker's pid."""
    go = tmp_path / "go"
    j = job("loader-kill", extra=("--go", str(go)))
    check = subprocess.Popen(
        j.check_argv("--duration", "14"),
        env=j.check_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert check.stdout is not None
        first = check.stdout.readline()  # check watches the live job (bounded by --duration)
        assert json.loads(first)["state"] == "ok", first
        go.touch()
        assert j.procs[1].wait(timeout=60) != 0  # the rank dies of its worker's death
        rest, err = check.communicate(timeout=150)
    finally:
        if check.poll() is None:
            check.kill()
    _, why = worker_death(j.out.read_text())
    lines = [json.loads(x) for x in [first, *rest.splitlines()]]
    assert check.returncode == 1, (err, [x["reason"] for x in lines])
    said = [x["reason"] for x in lines] + [f for x in lines for f in x.get("findings", [])]
    assert not any("on another node" in s for s in said), said
    hit = first_naming(lines, r"DataLoader worker")
    assert hit["state"] in ("stalled", "hung")
    assert hit["reason"] == f"rank 1 died: {why}", hit["reason"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc to build a stand-in libnccl")
def test_a_checkpoint_with_ras_naming_it_behind_is_never_stalled(job, fake_nccl):  # noqa: F811
    with ras_server(b"") as srv:
        port = srv.port  # a free port, for the ranks' NCCL_RAS_ADDR
    env = {"NCCL_RAS_ADDR": f"127.0.0.1:{port}", "LD_PRELOAD": str(fake_nccl)}
    j = job("checkpoint", env)
    with ras_server(*[ras_answer(j.pids)] * 60, port=port):
        code, lines, err = j.check("--duration", "16")
    states = [(round(x["t"] - (x.get("since") or x["t"]), 1), x["state"]) for x in lines]
    print(states)
    # check watches the whole host: another test's job (a rendezvous left waiting) may be
    # called beside this one, and then check's exit code is that job's
    mine = [x for x in lines if x.get("job_key") in (None, j.key)]
    others = [x for x in lines if x not in mine and x["state"] in ("stalled", "hung")]
    assert not any(x["state"] in ("stalled", "hung") for x in mine), [
        (x["state"], x.get("job_key"), x["reason"][:90]) for x in lines
    ]
    assert code == 0 or (code == 1 and others), (err, states)
    busy = first_naming(lines, r"rank 1 writes")
    assert busy["state"] == "busy" and busy["busy"]["pid"] == j.pids[1]
    assert re.search(r"\d+ MB/s|CPU core", busy["busy"]["rate"]), busy["busy"]
