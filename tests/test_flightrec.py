"""PyTorch's flight recorder, end to end with a real 2-rank gloo job
(gputui/collect/nccl/flightrec.py and fr_dumps.py).

What is real: torch 2.13's flight recorder recording a gloo job's collectives, the FIFOs,
gputui's trigger, wait and copy, PyTorch's own analyzer run with the job's interpreter, and
its output. What stands in: gloo has no thread watching the dump pipe (that lives in
ProcessGroupNCCL's heartbeat monitor), so the job runs a small one that does what NCCL's
does: on a line in `<pipe><rank>.pipe` it writes `torch._C._distributed_c10d._dump_fr_trace()`
to `<prefix><rank>`. torch 2.13's gloo also leaves the dump's `pg_config` empty (the analyzer
then fails with a KeyError, tested below as a failure); the monitor fills it in as
ProcessGroupNCCL writes it, and keeps the untouched dump beside it.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import HAS_TORCH, NO_TORCH, beside_ras, free_port, maps_nccl, needs_torch

from gputui.collect.nccl.flightrec import (
    FrRank,
    analyzer_argv,
    flight_record,
    job_interpreter,
    run_analyzer,
)
from gputui.collect.nccl.fr_analyzer import parse_analyzer
from gputui.collect.nccl.fr_dumps import stage, trigger, wait_for_dumps

JOB = r'''
import datetime, os, pickle, threading, time
import torch, torch.distributed as dist

rank = int(os.environ["RANK"])
pipe = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] + f"{rank}.pipe"
dump = os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] + f"{rank}"
untouched = os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] + f"raw{rank}"


def monitor():
    """What ProcessGroupNCCL's heartbeat monitor does with the pipe; gloo has none."""
    os.mkfifo(pipe)
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    print("PIPE", flush=True)
    while True:
        try:
            asked = os.read(fd, 64)
        except BlockingIOError:
            asked = b""
        if asked:
            raw = torch._C._distributed_c10d._dump_fr_trace()
            d = pickle.loads(raw)
            world = list(range(dist.get_world_size()))
            d["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": str(world)}}
            for path, data in ((dump, pickle.dumps(d)), (untouched, raw)):
                with open(path + ".tmp", "wb") as f:
                    f.write(data)
                os.replace(path + ".tmp", path)
        time.sleep(0.05)


dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
threading.Thread(target=monitor, daemon=True).start()
x = torch.ones(4)
for _ in range(5):
    dist.all_reduce(x)


def wait_for_the_data_loader():
    time.sleep(600)


print("READY", flush=True)
if rank == 1:
    wait_for_the_data_loader()  # rank 1 never enters collective 6
else:
    dist.all_reduce(x)  # rank 0 waits in it
'''


def _wait_for(proc: subprocess.Popen, word: str, lines: queue.Queue, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"rank pid {proc.pid} did not print {word} in {timeout} s")
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            continue
        if line is None:
            raise AssertionError(f"rank pid {proc.pid} exited before {word}")
        if line.strip() == word:
            return


@pytest.fixture(scope="module")
def gloo_job(tmp_path_factory):
    """Two real ranks: rank 0 waits in all_reduce #6, rank 1 never enters it."""
    if not HAS_TORCH:  # a test that forgot @needs_torch: skipped, not "exited before PIPE"
        pytest.skip(NO_TORCH)
    d = tmp_path_factory.mktemp("frjob")
    script = d / "train.py"
    script.write_text(JOB)
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": "2",
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": str(d / "pipe_"),
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(d / "dump_"),
    }
    procs, queues = [], []
    for rank in (0, 1):
        p = subprocess.Popen(
            [sys.executable, str(script)],
            env={**env, "RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            cwd=d,
        )
        q: queue.Queue = queue.Queue()

        def pump(p=p, q=q):
            for line in p.stdout:
                q.put(line)
            q.put(None)

        threading.Thread(target=pump, daemon=True).start()
        procs.append(p)
        queues.append(q)
    try:
        for p, q in zip(procs, queues, strict=True):
            _wait_for(p, "PIPE", q, 120)
            _wait_for(p, "READY", q, 120)
        ranks = [
            FrRank(
                pid=p.pid,
                rank=r,
                env={**env, "RANK": str(r)},
                uid=os.getuid(),
                gid=os.getgid(),
                interpreter=job_interpreter(p.pid, [sys.executable, str(script)], env),
            )
            for r, p in enumerate(procs)
        ]
        yield d, ranks
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


@needs_torch  # the gloo job's ranks import torch
def test_the_whole_path_names_the_rank_that_never_joined(gloo_job):
    d, ranks = gloo_job
    res = flight_record(ranks, threading.Event(), world_size=2, wait_s=60)
    assert res["outcome"] == "done", res
    assert res["triggers"] == {"0": "sent", "1": "sent"} and res["dumps"] == [0, 1]
    (f,) = [x for x in res["findings"] if x["kind"] == "missing"]
    assert f["seq"] == 6 and f["missing_ranks"] == [1] and f["expected_ranks"] == [0, 1]
    assert f["collective"] == "gloo:all_reduce" and f["group"] == "0:default_pg"
    assert f["frame"].startswith("<module> (train.py:")
    assert res["analyzer"]["argv"][1:5] == [
        "-I",
        "-m",
        "torch.distributed.flight_recorder.fr_trace",
        "--prefix",
    ]


@needs_torch  # the gloo job's ranks import torch
def test_the_analyzer_runs_with_the_jobs_own_interpreter(gloo_job):
    _, ranks = gloo_job
    # the venv's python, not the base binary /proc/PID/exe resolves to (it lacks the venv)
    assert ranks[0].interpreter == sys.executable
    assert os.path.realpath(f"/proc/{ranks[0].pid}/exe") == os.path.realpath(sys.executable)


@needs_torch  # the gloo job's ranks import torch
def test_an_analyzer_failure_is_reported_with_its_last_line(gloo_job):
    d, ranks = gloo_job
    assert trigger(f"{d}/pipe_0.pipe") == "sent" and trigger(f"{d}/pipe_1.pipe") == "sent"
    raw = {r: f"{d}/dump_raw{r}" for r in (0, 1)}
    found = wait_for_dumps(raw, time.time() - 0.5, 60, threading.Event())
    assert sorted(found) == [0, 1]
    directory, staged = stage(found, os.geteuid(), None)  # the dumps are this user's
    outcome, rc, text, _ = run_analyzer(
        analyzer_argv(sys.executable, directory, complete=True),
        cwd=directory,
        env=dict(os.environ),
        uid=None,
        gid=None,
        timeout=120,
        cancel=threading.Event(),
    )
    findings, failure = parse_analyzer(text)
    assert outcome == "done" and rc != 0
    assert failure is not None and failure.startswith("KeyError")  # gloo's empty pg_config


def test_a_pipe_nobody_reads_is_enxio_not_a_block(tmp_path):
    fifo = tmp_path / "p_0.pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    assert trigger(str(fifo)) == "no_reader"
    assert time.monotonic() - start < 1


def test_a_reader_gets_one_line(tmp_path):
    fifo = tmp_path / "p_0.pipe"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert trigger(str(fifo)) == "sent"
        assert os.read(fd, 16) == b"1\n"
    finally:
        os.close(fd)


def test_only_a_fifo_is_ever_written(tmp_path):
    plain = tmp_path / "p_0.pipe"
    plain.write_text("keep me")
    fifo = tmp_path / "real.pipe"
    os.mkfifo(fifo)
    link = tmp_path / "p_1.pipe"
    link.symlink_to(fifo)
    assert trigger(str(plain)) == "not_fifo" and plain.read_text() == "keep me"
    assert trigger(str(link)) == "not_fifo"
    assert trigger(str(tmp_path / "none.pipe")) == "no_pipe"


def test_waiting_for_dumps_is_bounded_and_ignores_old_files(tmp_path):
    old = tmp_path / "dump_0"
    old.write_bytes(b"x" * 10)
    os.utime(old, (time.time() - 100, time.time() - 100))
    start = time.monotonic()
    assert (
        wait_for_dumps(
            {0: str(old), 1: str(tmp_path / "dump_1")}, time.time(), 1.0, threading.Event()
        )
        == {}
    )
    assert 0.9 < time.monotonic() - start < 3


def test_an_analyzer_past_its_time_is_killed_with_its_group(tmp_path):
    code = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(60)']); print('started', flush=True); time.sleep(60)"
    )
    start = time.monotonic()
    outcome, rc, text, secs = run_analyzer(
        [sys.executable, "-c", code],
        cwd=str(tmp_path),
        env=dict(os.environ),
        uid=None,
        gid=None,
        timeout=2.0,
        cancel=threading.Event(),
    )
    assert outcome == "timeout" and rc == -signal.SIGKILL
    assert time.monotonic() - start < 10


@pytest.mark.skipif(os.geteuid() != 0, reason="switching user needs root")
def test_as_root_the_analyzer_runs_as_the_jobs_user(tmp_path):
    os.chmod(tmp_path, 0o755)
    outcome, rc, text, _ = run_analyzer(
        ["/usr/bin/id"],  # stands for the job's python: it runs as whoever the job runs as
        cwd=str(tmp_path),
        env=dict(os.environ),
        uid=65534,
        gid=65534,
        timeout=60,
        cancel=threading.Event(),
    )
    assert outcome == "done" and rc == 0
    assert text.startswith("uid=65534(") and "gid=65534(" in text
    assert text.split("groups=")[1].strip().count(",") == 0  # none of root's groups kept


def test_staging_copies_into_a_private_directory(tmp_path):
    src = tmp_path / "dump_3"
    src.write_bytes(b"pickle bytes")
    directory, staged = stage({3: str(src)}, os.geteuid(), None)
    try:
        assert staged == [3]
        assert Path(directory, "gputui_fr_rank_3").read_bytes() == b"pickle bytes"
        assert oct(os.stat(directory).st_mode & 0o777) == "0o700"
    finally:
        import shutil

        shutil.rmtree(directory)


def test_without_the_pipe_variable_nothing_is_triggered():
    r = FrRank(pid=1, rank=0, env={"TORCH_FR_BUFFER_SIZE": "2000"})
    res = flight_record([r], threading.Event())
    assert res["outcome"] == "off" and "TORCH_NCCL_DEBUG_INFO_PIPE_FILE is not set" in res["error"]


ANALYZER_OUTPUT = """\
tabulate is not installed. Proceeding without it.
Not all ranks joining collective, sequence number: 812
internal record id: 811
group info: 0:default_pg
collective: nccl:all_reduce
missing ranks: {1}
input sizes: [[1048576]]
output sizes: [[1048576]]
world size: 2
expected ranks: {0, 1}
collective state: scheduled
collective stack trace:
 all_reduce at /venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py:3245
wrapper at /venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py:83
train_step at /job/train.py:44
<module> at /job/train.py:60
We cannot decide what's wrong with this collective entry because we missed FR dumps from \
ranks ({2, 3}) so we don't have enough information. If you want to debug further use -j to \
dump all raw trace
""".replace("trace:\n", "trace: \n")  # torch prints a space there


def test_the_analyzers_report_becomes_findings():
    found, failure = parse_analyzer(ANALYZER_OUTPUT)
    assert failure is None
    assert found[0]["kind"] == "missing" and found[0]["seq"] == 812
    assert found[0]["frame"] == "train_step (train.py:44)"
    assert found[0]["frames"][0] == "all_reduce (distributed_c10d.py:3245)"
    assert found[1] == {
        "kind": "undecided",
        "missing_dumps": [2, 3],
        "seq": 812,
        "collective": "nccl:all_reduce",
        "group": "0:default_pg",
        "frame": None,
        "frames": [],
    }


@needs_torch  # the gloo job's ranks import torch
def test_the_nccl_gatherer_brings_the_analyzers_answer_to_the_verdict(gloo_job):
    """gather_nccl on the real job, then explain_nccl on its record, as the Watcher will."""
    import json

    import psutil
    from synth import snapshot

    from gputui.collect.model import ProcessInfo, RankInfo
    from gputui.diagnose.nccl.ras import explain_nccl
    from gputui.diagnose.verdict import Verdict
    from gputui.tools.gather.nccl import gather_nccl
    from gputui.watch.watcher import JobTarget

    _, ranks = gloo_job
    procs = tuple(
        ProcessInfo(
            pid=r.pid,
            create_time=psutil.Process(r.pid).create_time(),
            gpus=(r.rank,),
            rank=RankInfo(rank=r.rank, world_size=2),
        )
        for r in ranks
    )
    v = Verdict(t=1.0, state="stalled", spinning=(0,), suspects=(1,), suspect_pids=(procs[1].pid,))
    target = JobTarget(
        key="master:127.0.0.1", label="job", trigger="stalled", verdict=v, ranks=procs
    )
    rec = gather_nccl(target, threading.Event(), ras_interval=0.2, fr_wait_s=60)
    rec = json.loads(json.dumps(rec))  # what a recording keeps
    assert rec["type"] == "nccl" and rec["job"] == "master:127.0.0.1"
    assert [x["rank"] for x in rec["local"]] == [0, 1]
    ev = explain_nccl(rec, v, snapshot(1.0, ["spin", "idle"]))
    pids = [r.pid for r in ranks]
    assert beside_ras(ev.findings, pids) == (  # a CUDA torch's ranks map NCCL: RAS is asked
        "flight recorder: not all ranks joined collective 6 (all_reduce, group 0:default_pg): "
        "missing rank 1.",
    )
    if not maps_nccl(pids):  # torch's CPU build carries no NCCL: check --json says why
        assert ev.extra["why"].startswith("The job has not loaded NCCL")


@needs_torch  # the gloo job's ranks import torch
def test_dumps_of_other_nodes_ranks_on_a_shared_directory_complete_the_analysis(gloo_job):
    """Rank 1 plays a rank of another node whose gputui dumped it into the same directory."""
    d, ranks = gloo_job
    assert trigger(f"{d}/pipe_1.pipe") == "sent"  # what gputui on rank 1's node does
    assert wait_for_dumps({1: f"{d}/dump_1"}, time.time() - 0.5, 60, threading.Event())
    res = flight_record([ranks[0]], threading.Event(), world_size=2, wait_s=60)
    assert res["outcome"] == "done" and res["dumps"] == [0, 1], res
    assert "--allow-incomplete-ranks" not in res["analyzer"]["argv"]
    (f,) = [x for x in res["findings"] if x["kind"] == "missing"]
    assert f["missing_ranks"] == [1]
