"""PyTorch's debug server, live: a real 3-rank gloo job (scripts/device/multi_worker.py `stuck`)
that calls `torch.distributed.debug.start_debug_server` after its process group is up, with
periodic dumps into a temporary directory. Rank 2 sleeps in load_next_batch_stuck while
ranks 0 and 1 wait in all_reduce.

Rank 2 plays a rank on another node: gputui never dumps it (it is on no GPU of the
snapshot, and not in the stand-in's process list), so its line can only come from the debug
server, which gputui finds through rank 0's child's listening socket. Covers: the Watcher's
verdict names rank 2's line from the server alone; `check --json` (against the stand-in
libnvidia-ml.so.1, tests/nvml_standin) carries it with the `debugserver` key; the periodic
dump stands in when no server is asked, found from the ranks' command line; the record
replays to the same verdict. Each wait is bounded (the job's start, the front end's port,
the first dump) and fails with what was seen.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from conftest import free_port
from nvml_standin.build import REPO, build_standin, standin_env
from targets.multi_job import WORKER, MultiJob, line_of, snapshot

from gputui.collect.model import ProcessInfo, RankInfo
from gputui.collect.nccl import debugserver as ds
from gputui.collect.nccl import debugserver_ask as ask
from gputui.collect.nccl import debugserver_find as find
from gputui.tools.which import find_tool
from gputui.watch.watcher import Watcher

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed"),
    pytest.mark.skipif(
        importlib.util.find_spec("aiohttp") is None or importlib.util.find_spec("tabulate") is None,
        reason="the debug server's front end needs aiohttp and tabulate (the dev extra)",
    ),
    pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed"),
]

N, ODD = 3, 2
START_S = 120.0  # 3 ranks importing torch on a busy 2-core box; bounded, not slept
FRONT_END_S = 60.0  # the front end is a process rank 0 starts; it imports torch too
HOST = socket.gethostname()


class Job:
    def __init__(self, job: MultiJob, port: int, dumps: Path) -> None:
        self.job, self.port, self.dumps = job, port, dumps

    @property
    def pids(self) -> list[int]:
        return self.job.pids


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    dumps = tmp_path_factory.mktemp("debug-dumps")
    port = free_port()
    extra = ["--debug-server", str(port), "--debug-dump-dir", str(dumps)]
    j = MultiJob(N, "stuck", odd=ODD, lifetime=240, extra=[*extra, "--debug-dump-interval", "2"])
    try:
        assert j.in_place(START_S), f"ranks not in place: {j.lines}\n{j.stderr_tail()}"
        started = j.of("DEBUGSERVER")
        if any("absent" in x for x in started):
            pytest.skip(f"this torch has no debug server: {started}")
        up = wait_for(
            lambda: ds.confirm(find.Candidate("127.0.0.1", port, "t"), ds.Fetch())[0], FRONT_END_S
        )
        assert up, f"the debug server's front end never answered on {port}: {j.stderr_tail()}"
        yield Job(j, port, dumps)
    finally:
        j.close()


def wait_for(cond, timeout: float, every: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(every)
    return cond()


def stuck_line() -> str:
    return (
        f"load_next_batch_stuck (multi_worker.py:{line_of(WORKER, 'time.sleep(min(1.0, left))')})"
    )


def watch_local(pids: list[int], attempts: int = 3) -> tuple:
    """A Watcher that sees ranks 0 and 1 on two spinning GPUs (rank 2 is elsewhere), until
    its gatherers are done; its verdict and the records it took.

    The front end must answer its index page within CONFIRM_S (3 s). On the 2-core CI box,
    with five other test workers importing torch, it once did not, and the gatherer then
    rightly said nothing. A stall is watched again, at most `attempts` times, until the
    server answers; what each try took is in the failure message."""
    tries = []
    for _ in range(attempts):
        v, records = _watch_once(pids)
        got = [r for r in records if r["type"] == "debugserver"]
        if got and got[-1].get("outcome") == "done":
            return v, records
        tries.append([(r.get("outcome"), r.get("error")) for r in got] or "no record")
    raise AssertionError(f"the debug server never answered a stall in {attempts} tries: {tries}")


def _watch_once(pids: list[int]) -> tuple:
    w = Watcher(1.0, 60.0, host_ranks=False)
    t = 1000.0
    try:
        for seconds, state in ((0.5, "compute"), (2.0, "spin")):
            for _ in range(round(seconds / 0.25)):
                w.update(snapshot(t, pids, [state, state]))
                t += 0.25
        assert w.wait(60.0), "the gatherers did not finish within their bounds"
        return w.latest(), w.take_records()
    finally:
        w.close()


def test_a_remote_ranks_line_comes_from_the_debug_server_alone(job):
    v, records = watch_local(job.pids[:2])
    line = stuck_line()
    assert v is not None and v.state == "stalled"
    head = f"rank 2 on {HOST} (via the debug server) is in {line}: ranks 0-1 wait in all_reduce #"
    assert v.reason.startswith(head), v.reason
    assert v.culprit_frame == line
    # gputui's own stacks hold ranks 0 and 1 only: rank 2's line is the server's
    assert sorted(s["rank"] for s in v.stacks) == [0, 1]
    named = [f for f in v.ranked if f.source == "debugserver" and 2 in f.ranks]
    assert {f.strength.name for f in named} >= {"MISMATCH", "CULPRIT_LINE"}
    entry = v.evidence["debugserver"]
    assert entry["via"] == "server" and entry["server"].endswith(f":{job.port}")
    assert "child of rank 0" in entry["found_by"]
    ranks = {r["rank"]: r for r in entry["ranks"]}
    assert ranks[2]["frame"] == line and ranks[2]["collective"] is None and ranks[2]["pid"] is None
    assert ranks[0]["pid"] == job.pids[0] and ranks[0]["collective"] == "all_reduce"
    assert ranks[2]["seq"]["0"] < ranks[0]["seq"]["0"]  # it never entered the others' collective
    (rec,) = [r for r in records if r["type"] == "debugserver"]
    assert rec["elapsed_s"] < ask.REQUEST_S


def test_the_record_replays_to_the_same_verdict(job):
    v, records = watch_local(job.pids[:2])
    snaps = []
    t = 1000.0
    for seconds, state in ((0.5, "compute"), (2.5, "spin")):
        for _ in range(round(seconds / 0.25)):
            snaps.append(snapshot(t, job.pids[:2], [state, state]))
            t += 0.25
    recs = tuple({**r, "t": snaps[-3].t} for r in records)
    snaps[-3] = replace(snaps[-3], records=recs)
    w = Watcher(1.0, 60.0, live=False)
    try:
        for s in snaps:
            replayed = w.update(s)
    finally:
        w.close()
    assert "debugserver" in v.evidence, v.reason
    assert replayed.reason == v.reason and replayed.culprit_frame == v.culprit_frame
    assert replayed.evidence["debugserver"]["ranks"] == v.evidence["debugserver"]["ranks"]


def rank_process(pid: int, rank: int) -> ProcessInfo:
    p = psutil.Process(pid)
    return ProcessInfo(
        pid,
        p.create_time(),
        cmdline=tuple(p.cmdline()),
        rank=RankInfo(rank=rank, master="127.0.0.1:1"),
    )


def test_the_periodic_dump_stands_in_found_from_the_ranks_command_line(job):
    """Rank 1 alone is known here (rank 0 elsewhere, its host this one: not asked): the
    dump directory its command line names gives every rank's line, with the dump's time."""

    def dumped() -> bool:
        return any(p.name.startswith("stacks_") for p in job.dumps.iterdir())

    assert wait_for(dumped, 30.0), f"no dump in {job.dumps}: {os.listdir(job.dumps)}"
    one = [rank_process(job.pids[1], 1)]
    rec = None

    def has_stuck_rank() -> bool:
        nonlocal rec
        rec = ds.gather_debugserver("j", "stalled", one, threading.Event())
        return rec is not None and any(
            e["rank"] == ODD and e["frames"] and e["frames"][0][0] == "load_next_batch_stuck"
            for e in rec["ranks"]
        )

    assert wait_for(has_stuck_rank, 30.0, every=1.0), rec
    assert rec["via"] == "dump" and rec["dump"]["dir"] == str(job.dumps)
    assert time.time() - 60 < rec["dump"]["written"] <= time.time()
    by_rank = {e["rank"]: e for e in rec["ranks"]}
    assert by_rank[1]["pid"] == job.pids[1] and by_rank[2]["pid"] is None


def test_check_json_carries_the_debug_servers_line(job):
    env = standin_env(build_standin(), "spin", pids=job.pids[:2])
    env["PYTHONPATH"] = str(REPO)
    argv = [
        sys.executable,
        "-m",
        "gputui",
        "check",
        "--json",
        "--stall-after",
        "1",
        "--duration",
        "6",
        "--interval",
        "0.25",
    ]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 1, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    hit = next((x for x in lines if "debugserver" in x), None)
    assert hit is not None, [x["reason"] for x in lines]
    assert hit["reason"].startswith(f"rank 2 on {HOST} (via the debug server) is in {stuck_line()}")
    assert hit["culprit_frame"] == stuck_line()
    assert hit["ranked"][0]["source"] == "debugserver" and hit["ranked"][0]["ranks"] == [2]
    assert {r["rank"] for r in hit["debugserver"]["ranks"]} == {0, 1, 2}
    assert isinstance(hit["debugserver"]["t"], float)  # when the server was asked


def test_the_exporter_says_whether_a_stalled_jobs_debug_server_answers(job):
    """`gputui_job_debug_server`: 1 while the stalled job's front end answers its index page
    (asked off the sampler thread), no series before the job stalls."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gputui.diagnose.hang.detector import Detector
    from gputui.exporter.debugserver_up import DebugServerUp
    from gputui.exporter.run import make_registry
    from gputui.exporter.view import Watch

    def series(w: Watch) -> list:
        text = generate_latest(make_registry(w)).decode()
        fams = text_string_to_metric_families(text)
        return [s for f in fams for s in f.samples if s.name == "gputui_job_debug_server"]

    up = DebugServerUp(every=0.2)
    w = Watch(Detector(stall_after=1.0, hang_after=60.0), host="n", debug=up)
    t = 1000.0
    try:
        for _ in range(4):
            w.on_snapshot(snapshot(t, job.pids[:2], ["compute", "compute"]))
            t += 0.25
        assert series(w) == []  # not stalled: not asked

        def answered() -> bool:
            nonlocal t
            w.on_snapshot(snapshot(t, job.pids[:2], ["spin", "spin"]))
            t += 0.25
            return [s.value for s in series(w)] == [1.0]

        assert wait_for(answered, 30.0), series(w)
    finally:
        up.close()
