"""The NCCL gatherer against real processes and a real RAS socket (gputui/tools/gather/nccl.py).

The ranks are real Python processes whose environment names the RAS address; the RAS
thread is the test's TCP server answering with the constructed 4-rank answers. The record
must survive JSON (a recording) and explain the same way afterwards.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import psutil
from ras_server import free_ras_port, ras_server, relayed_ranks
from synth import snapshot

from gputui.collect.model import ProcessInfo, RankInfo
from gputui.diagnose.nccl.ras import explain_nccl
from gputui.diagnose.verdict import Verdict
from gputui.tools.gather.nccl import gather_nccl
from gputui.watch.watcher import JobTarget

DATA = Path(__file__).parent / "data" / "ras"
VERDICT = Verdict(t=1.0, state="stalled", spinning=(0,), suspects=(1,))


def target_of(*children, rank0: int = 0, create_time=None) -> JobTarget:
    procs = tuple(
        ProcessInfo(
            pid=c.pid,
            create_time=create_time or psutil.Process(c.pid).create_time(),
            gpus=(i,),
            rank=RankInfo(rank=rank0 + i, world_size=4),
        )
        for i, c in enumerate(children)
    )
    return JobTarget(
        key="master:10.0.0.1:29500", label="job", trigger="stalled", verdict=VERDICT, ranks=procs
    )


def explain(rec):
    return explain_nccl(json.loads(json.dumps(rec)), VERDICT, snapshot(1.0, ["spin", "idle"]))


def test_two_answers_a_moment_apart_name_the_rank_behind(spawn):
    port, backend = free_ras_port(), free_ras_port()  # the ports first, for the ranks' env
    # rank 0 itself listens on the RAS port (as NCCL's RAS thread does) and relays to the
    # test's server: only a rank's listener is evidence without a note
    kids = relayed_ranks(spawn, backend, port=port)
    # the job's ranks 0 and 1 are these two processes (pids 907, 908 in the file)
    text = (DATA / "behind-4rank.json").read_text()
    answer = text.replace('"pid": 907', f'"pid": {kids[0].pid}')
    answer = answer.replace('"pid": 908', f'"pid": {kids[1].pid}').encode()
    with ras_server(answer, answer, port=backend) as srv:
        rec = gather_nccl(target_of(*kids), threading.Event(), ras_interval=0.5)
    assert [q["outcome"] for q in rec["ras"]["queries"]] == ["done", "done"]
    assert rec["ras"]["queries"][0]["listener"].endswith(f"pid {kids[0].pid}")
    assert rec["ras"]["env"] == {"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}
    assert len(srv.received) == 2
    ev = explain(rec)
    (line,) = ev.findings  # the rank behind, and no note on the listener
    assert line.startswith(
        f"NCCL RAS: rank 1 (10.0.0.1, pid {kids[1].pid}, GPU 1 on this node) is behind: "
        "AllReduce count 812, the other 3 ranks 813, unchanged over "
    )
    assert ev.extra["behind"][0]["confirmed"] is True


def test_ras_turned_off_is_not_asked_and_says_so(spawn):
    with ras_server((DATA / "behind-4rank.json").read_bytes()) as srv:
        kid = spawn({"NCCL_RAS_ADDR": srv.addr, "NCCL_RAS_ENABLE": "0"})
        rec = gather_nccl(target_of(kid), threading.Event(), ras_interval=0.1)
    assert srv.received == [] and rec["ras"]["queries"] == []
    assert explain(rec).findings == (
        "NCCL RAS is off (NCCL_RAS_ENABLE=0 in the job's environment).",
    )


def test_a_silent_ras_is_one_bounded_query_not_two(spawn):
    with ras_server("close") as srv:
        kid = spawn({"NCCL_RAS_ADDR": srv.addr})
        rec = gather_nccl(target_of(kid), threading.Event(), ras_interval=0.1)
    (q,) = rec["ras"]["queries"]
    assert q["outcome"] in ("garbage", "error")
    # a job that never loaded NCCL: nothing for the banner, the reason in check --json's entry
    ev = explain(rec)
    assert ev.findings == () and ev.extra["why"].startswith("The job has not loaded NCCL")


def test_a_rank_that_is_gone_or_recycled_gives_no_record(spawn):
    kid = spawn()
    assert gather_nccl(target_of(kid, create_time=1.0), threading.Event()) is None
    seen = target_of(kid)
    kid.kill()
    kid.wait(timeout=10)
    assert gather_nccl(seen, threading.Event()) is None


def test_cancel_ends_the_pause_between_the_two_queries(spawn):
    answer = (DATA / "behind-4rank.json").read_bytes()
    cancel = threading.Event()
    with ras_server(answer, answer) as srv:
        kid = spawn({"NCCL_RAS_ADDR": srv.addr})
        threading.Timer(0.5, cancel.set).start()
        start = time.monotonic()
        rec = gather_nccl(target_of(kid), cancel, ras_interval=60)
    assert time.monotonic() - start < 10
    assert len(rec["ras"]["queries"]) == 1


def test_a_failure_inside_is_data_in_the_record():
    class Broken:
        key, trigger = "k", "stalled"

        @property
        def ranks(self):
            raise RuntimeError("boom")

    rec = gather_nccl(Broken(), threading.Event())
    assert rec["error"] == "RuntimeError: boom"
    assert explain(rec).findings == ("NCCL evidence could not be gathered: RuntimeError: boom",)


def test_a_refusal_from_an_nccl_older_than_ras_says_the_version(spawn, tmp_path):
    """The rank maps libnccl.so.2.21.5 (a real mapping of a file of that name)."""
    lib = tmp_path / "libnccl.so.2.21.5"
    lib.write_bytes(b"\0" * 4096)
    code = (
        "import mmap\n"
        f"f = open({str(lib)!r}, 'rb')\n"
        "m = mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ)\n"
    )
    with ras_server(b"") as srv:
        closed = srv.addr  # a port where nothing listens once the server is gone
    kid = spawn({"NCCL_RAS_ADDR": closed}, code=code)
    rec = gather_nccl(target_of(kid), threading.Event(), ras_interval=0.1)
    assert rec["ras"]["nccl"] == {"loaded": True, "version": "2.21.5"}
    assert rec["ras"]["queries"][0]["outcome"] == "refused"
    assert explain(rec).findings == ("NCCL 2.21.5 is too old for RAS (needs 2.24).",)
