"""Arriving late, and progress is not a hang: `gputui check` as a person runs it, on real
processes, against the stand-in libnvidia-ml.so.1 (tests/nvml_standin/).

Two real processes stand in for the ranks of a 2-GPU job (RANK, LOCAL_RANK, WORLD_SIZE and
LOCAL_WORLD_SIZE set as torchrun sets them); the stand-in puts rank r on GPU r
(GPUTUI_STANDIN_PIDS) and makes GPU 0 spin (`spin_gpu:0`): rank 0 waits in a collective for
rank 1, who is doing one thing for good (tests/targets/busy_rank.py):

- (a) rank 1 printed PyTorch's `[rank1]:` traceback of an illegal memory access into the
  job's one output file (as `srun -o job.out`) and exited BEFORE gputui started: `check`
  quotes it, with how long ago it died, and prints no new line while nothing changes;
- (b) it writes a checkpoint at a bounded rate in save_checkpoint(): busy, exit 0, the rate
  and the frame; recorded and replayed, the replay says the same;
- (c) it compiles (new generated functions burn the CPU: frames that move): busy;
- (d) it sleeps (the control): stalled within 15 s of the spin's onset;
- (e) it spins in `while True: pass`: a whole core, one frame: not busy;
- (f) the checkpoint never ends: past --busy-limit it is an alarm (exit 1);
- and the 80x24 dashboard shows the BUSY badge with the rate, no key pressed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import free_port, needs_torch
from nvml_standin.build import REPO, build_standin, standin_env
from tmux import Tmux, needs_tmux

from gputui.tools.which import find_tool

pytestmark = pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")

RANK = Path(__file__).parent / "targets" / "busy_rank.py"
ALARM_WITHIN_S = 15.0  # a rank that does not advance alarms as before, within 15 s of onset
_AGE = re.compile(r"\d+ (s|min|h) ago")


class Job:
    """Rank 0 waits; rank 1 plays `role`. Every process ends in close()."""

    def __init__(self, tmp: Path, role: str, *args: str, out: Path | None = None) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self.tmp = tmp
        port = str(free_port())
        self.env = {
            **os.environ,
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
        }
        self.out = out
        self.r0 = self._start(0, "wait")
        self.r1 = self._start(1, role, *args)

    def _start(self, rank: int, role: str, *args: str) -> subprocess.Popen[str]:
        env = {**self.env, "RANK": str(rank), "LOCAL_RANK": str(rank)}
        argv = [sys.executable, str(RANK), role, "--lifetime", "150", *args]
        shared = open(self.out, "ab") if self.out is not None else None  # noqa: SIM115
        try:
            p = subprocess.Popen(
                argv,
                env=env,
                cwd=self.tmp,
                stdin=subprocess.DEVNULL,
                stdout=shared if shared is not None else subprocess.PIPE,
                stderr=shared if shared is not None else subprocess.DEVNULL,
                text=True,
            )
        finally:
            if shared is not None:
                shared.close()
        self.procs.append(p)
        if role != "die" and p.stdout is not None:
            assert p.stdout.readline().startswith("ready "), f"rank {rank} did not start"
        elif role != "die" and self.out is not None:  # its ready line goes to the shared file
            deadline = time.monotonic() + 30
            while f"ready {p.pid}" not in self.out.read_text():
                assert time.monotonic() < deadline, f"rank {rank} did not start"
                time.sleep(0.02)
        return p

    def check(self, *args: str, pids: str | None = None, timeout: float = 120.0):
        """`gputui check ARGS` on this job: (exit status, JSON lines or text, stderr)."""
        env = standin_env(build_standin(), "spin_gpu:0")
        env["GPUTUI_STANDIN_PIDS"] = pids or f"{self.r0.pid},{self.r1.pid}"
        env["PYTHONPATH"] = str(REPO)
        r = subprocess.run(
            [sys.executable, "-m", "gputui", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if "--json" in args:
            return r.returncode, [json.loads(x) for x in r.stdout.splitlines()], r.stderr
        return r.returncode, r.stdout, r.stderr

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
            if p.stdout is not None:
                p.stdout.close()


@pytest.fixture
def job(tmp_path: Path) -> Iterator:
    made: list[Job] = []

    def start(role: str, *args: str, out: Path | None = None) -> Job:
        j = Job(tmp_path, role, *args, out=out)
        made.append(j)
        return j

    yield start
    for j in made:
        j.close()


def listening(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def said(lines: list[dict]) -> list[tuple]:
    """What each line says, without its time and ages: two equal in a row is a repeat."""
    return [
        (x["state"], tuple(_AGE.sub("ago", f) for f in x.get("findings", [])), x["reason"][:40])
        for x in lines
    ]


def test_a_rank_gone_before_check_started_is_quoted_from_the_shared_output_file(job, tmp_path):
    out = tmp_path / "job.out"
    j = job("die", out=out)  # rank 1 writes its traceback and exits at once
    assert j.r1.wait(timeout=30) == 1
    assert "[rank1]: RuntimeError: CUDA error" in out.read_text()
    code, lines, err = j.check(
        "check", "--json", "--stall-after", "3", "--duration", "9", pids=f"{j.r0.pid},0"
    )
    assert code == 1, err
    hit = next((x for x in lines if x["reason"].startswith("rank 1 died")), None)
    assert hit is not None, [x["reason"] for x in lines]
    assert re.fullmatch(
        r"rank 1 died \d+ s ago: CUDA error: an illegal memory access \(train\.py:41\)",
        hit["reason"],
    ), hit["reason"]
    late = next(e for e in hit["lastwords"]["ranks"] if e["rank"] == 1)
    assert late["late"] and late["gone"] and late["log"] == str(out)
    assert late["held_by"] == f"rank 0 (pid {j.r0.pid})"
    assert late["dated_by"] == "the log's last write"
    assert abs(late["died_at"] - out.stat().st_mtime) < 1.0
    assert hit["suspects"] == [1] and hit["state"] == "stalled"
    # The same death is one line, not a new one every sample while nothing changes.
    says = said(lines)
    assert all(a != b for a, b in zip(says, says[1:], strict=False)), says
    assert len(lines) <= 4, [x["reason"][:60] for x in lines]


def test_a_checkpoint_writer_is_busy_not_stalled_and_check_exits_0(job, tmp_path):
    j = job("checkpoint", "--rate", "20", "--path", str(tmp_path / "ckpt.pt"))
    code, lines, err = j.check("check", "--json", "--duration", "15")
    assert code == 0, (err, [x["reason"] for x in lines])
    assert not any(x["state"] in ("stalled", "hung") for x in lines), [x["state"] for x in lines]
    busy = [x for x in lines if x["state"] == "busy"]
    assert busy, [x["reason"] for x in lines]
    b = busy[-1]["busy"]
    assert (b["rank"], b["pid"], b["gpu"], b["what"]) == (1, j.r1.pid, 1, "writes a checkpoint")
    assert b["frame"].startswith("save_checkpoint (busy_rank.py:"), b["frame"]
    rate = float(b["rate"].split()[0])
    assert 8 <= rate <= 40, b["rate"]  # written at 20 MB/s
    assert re.fullmatch(
        r"rank 1 writes a checkpoint: save_checkpoint \(busy_rank\.py:\d+\), \d+ MB/s for \d+ s",
        busy[0]["reason"],
    ), busy[0]["reason"]
    print(f"busy at +{busy[0]['t'] - lines[0]['t']:.1f} s, {b['rate']}")


def test_a_recorded_checkpoint_replays_as_busy(job, tmp_path):
    j = job("checkpoint", "--rate", "20", "--path", str(tmp_path / "ckpt.pt"))
    rec = tmp_path / "busy.jsonl.gz"
    code, _, err = j.check("record", str(rec), "--duration", "11", "--stall-after", "6")
    assert code == 0, err
    code, lines, err = j.check("check", "--replay", str(rec), "--json", "--stall-after", "6")
    assert code == 0, [(x["t"], x["state"], x["reason"][:70]) for x in lines]
    busy = [x for x in lines if x["state"] == "busy"]
    assert busy and busy[-1]["busy"]["what"] == "writes a checkpoint", [x["state"] for x in lines]


def test_a_compile_whose_frames_move_is_busy(job):
    j = job("compile")
    code, text, err = j.check("check", "--stall-after", "6", "--duration", "11")
    assert code == 0, (err, text)
    assert re.search(r"BUSY +rank 1 compiles on the CPU: .*, [\d.]+ CPU cores? for \d+ s", text), (
        text
    )
    assert "final: busy: rank 1 compiles on the CPU" in text


def test_a_sleeping_rank_is_stalled_within_15_s_of_the_onset(job):
    j = job("stuck")
    code, lines, err = j.check("check", "--json", "--duration", "14")
    assert code == 1, err
    stalled = next(x for x in lines if x["state"] == "stalled")
    took = stalled["t"] - stalled["since"]
    print(f"stuck rank: stalled {took:.1f} s after the onset")
    assert took <= ALARM_WITHIN_S
    assert not any(x["state"] == "busy" for x in lines)
    last = lines[-1]
    assert any(
        f.startswith(f"rank 1 (pid {j.r1.pid}) makes no progress: no bytes read or written")
        for f in last["findings"]
    ), last["findings"]


def test_a_busy_wait_loop_is_not_busy(job):
    j = job("busyloop")
    code, lines, err = j.check("check", "--json", "--stall-after", "6", "--duration", "11")
    assert code == 1, err
    assert not any(x["state"] == "busy" for x in lines), [x["reason"] for x in lines]
    last = lines[-1]
    assert last["state"] == "stalled"
    mine = [f for f in last["findings"] if "makes no progress" in f]
    # The loop burns a core when it gets one. On the 2-core CI box, beside five other test
    # workers, it once got less than CPU_MIN (0.25 cores) over the window, and the judge then
    # says what it measured; which words follow which CPU is tests/test_progress_judge.py's.
    said = ("busy-wait loop, not progress", "no CPU time to speak of, its stack stands still")
    assert mine and any(w in mine[0] for w in said), last["findings"]
    judged = next(r for r in last["progress"]["ranks"] if r["pid"] == j.r1.pid)
    assert judged["advancing"] is False


def test_a_busy_phase_past_busy_limit_is_an_alarm(job, tmp_path):
    j = job("checkpoint", "--rate", "20", "--path", str(tmp_path / "ckpt.pt"))
    code, lines, err = j.check(
        "check", "--json", "--stall-after", "3", "--busy-limit", "8", "--duration", "14"
    )
    assert code == 1, err
    states = [x["state"] for x in lines]
    assert "busy" in states and states[-1] in ("stalled", "hung"), states
    assert states.index("busy") < max(i for i, s in enumerate(states) if s != "busy")
    last = lines[-1]
    assert re.match(
        r"busy for \d+ s, past --busy-limit \(8 s\): rank 1 writes a checkpoint", last["reason"]
    )
    assert last["busy"]["what"] == "writes a checkpoint" and last["busy"]["for_s"] >= 8


@needs_tmux
def test_the_80x24_dashboard_shows_busy_with_the_rate_and_no_alarm(job, tmp_path):
    j = job("checkpoint", "--rate", "20", "--path", str(tmp_path / "ckpt.pt"))
    env = standin_env(build_standin(), "spin_gpu:0")
    keep = {k: env[k] for k in ("LD_LIBRARY_PATH", "GPUTUI_STANDIN_NVML")}
    keep |= {"GPUTUI_STANDIN_PIDS": f"{j.r0.pid},{j.r1.pid}", "PYTHONPATH": str(REPO)}
    tmux = Tmux(80, 24)
    try:
        tmux.start([sys.executable, "-m", "gputui", "--no-mouse", "--stall-after", "4"], keep)
        # "writes" at first, "writes a checkpoint" once a dump has seen save_checkpoint
        screen = tmux.wait(lambda s: "BUSY" in s and "a checkpoint" in s, "the BUSY badge", 60)
    finally:
        tmux.close()
    flat = " ".join(ln.strip() for ln in screen.splitlines())
    assert re.search(
        r"BUSY\s+rank 1 writes a checkpoint: save_checkpoint \(busy_rank\.py:\d+\),", flat
    )
    assert "STALLED" not in screen and "SUSPECT" not in screen, screen


@needs_torch  # torchrun's agents are torch's
def test_two_torchrun_agents_as_two_nodes_the_other_agents_record_is_read(tmp_path):
    """Agent 0 (ranks 0, 1: they wait) and agent 1 (ranks 2, 3) share one output file;
    rank 3 writes its `[rank3]:` traceback and exits before gputui starts, agent 1 stops
    rank 2, writes its record of both and exits. `check` on agent 0's ranks names rank 3,
    its age from the agent's record, and says rank 2 was stopped by its agent."""
    out = tmp_path / "job.out"
    port = str(free_port())
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2"]
    argv += ["--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-id", "late"]
    argv += ["--rdzv-endpoint", f"127.0.0.1:{port}", "--max-restarts", "0"]
    argv += [str(RANK), "last-dies", "--lifetime", "120"]
    agents: list[subprocess.Popen] = []
    try:
        with open(out, "ab") as f:
            for node in (0, 1):
                env = {**os.environ, "NCCL_HOSTID": f"node{node}", "PYTHONWARNINGS": "ignore"}
                agents.append(
                    subprocess.Popen(argv, env=env, stdout=f, stderr=f, start_new_session=True)
                )
                deadline = time.monotonic() + 60
                while node == 0 and not listening(int(port)):  # agent 0 hosts the store
                    assert time.monotonic() < deadline, out.read_text()[-2000:]
                    time.sleep(0.05)
        assert agents[1].wait(timeout=90) != 0, out.read_text()[-2000:]
        pids = [int(p) for p in re.findall(r"ready (\d+)", out.read_text())]
        live = [p for p in pids if psutil.pid_exists(p)]
        assert len(live) == 2, (pids, out.read_text()[-2000:])
        env = standin_env(build_standin(), "spin")
        env["GPUTUI_STANDIN_PIDS"] = ",".join(map(str, sorted(live)))
        env["PYTHONPATH"] = str(REPO)
        argv2 = [sys.executable, "-m", "gputui", "check", "--json", "--stall-after", "3"]
        r = subprocess.run(
            [*argv2, "--duration", "7"], env=env, capture_output=True, text=True, timeout=120
        )
    finally:  # the agents and their ranks (torchrun starts each rank in a group of its own)
        for a in agents:
            try:
                os.killpg(a.pid, 9)
            except ProcessLookupError:
                pass
            a.wait(timeout=30)
        for pid in map(int, re.findall(r"ready (\d+)", out.read_text())):
            try:  # still this test's rank (a pid is reused): then end it
                p = psutil.Process(pid)
                if str(RANK) in p.cmdline():
                    p.kill()
            except psutil.Error:
                pass
    assert r.returncode == 1, r.stderr
    last = [json.loads(x) for x in r.stdout.splitlines()][-1]
    assert re.fullmatch(
        r"rank 3 \(on another node\) died \d+ s ago: CUDA error: an illegal memory access "
        r"\(train\.py:41\)",
        last["reason"],
    ), last["reason"]
    late = {e["rank"]: e for e in last["lastwords"]["ranks"] if e.get("late")}
    assert late[3]["exit"]["by"] == "torchrun" and late[3]["dated_by"] == "torchrun's record"
    assert any("was stopped by torchrun (signal 15)" in f for f in last["findings"])
    assert not any("wrote an error and is still alive" in f for f in last["findings"])
