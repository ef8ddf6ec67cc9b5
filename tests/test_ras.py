"""NCCL RAS: the parser on real and constructed answers, and the client against real sockets.

The 1-rank answers (text and JSON) were captured from NCCL 2.28.9 on the GPU image; the
multi-rank ones are constructed from NCCL's source (tests/data/ras/README.md says how).
The client is tested against a real TCP server on 127.0.0.1 that answers, refuses, accepts
and never answers, sends garbage, or sends too much: every case ends within its bound.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from ras_server import ras_server

from gputui.collect.nccl.ras import parse_addr, query_ras
from gputui.collect.nccl.ras_model import answer_from_dict, answer_to_dict
from gputui.collect.nccl.ras_parse import parse_answer

DATA = Path(__file__).parent / "data" / "ras"


def captured() -> dict[str, str]:
    """The two answers of the GPU image's capture, split at its '--- [commands]' lines."""
    parts = (DATA / "ras-status-1rank.txt").read_text().split("--- ")[1:]
    out = {}
    for p in parts:
        head, body = p.split("\n", 1)
        out["json" if "FORMAT json" in head else "text"] = body
    return out


def test_the_captured_text_answer_gives_version_totals_and_a_healthy_communicator():
    a = parse_answer(captured()["text"])
    assert a.format == "text" and a.nccl_version == "2.28.9"
    assert (a.nodes, a.processes, a.gpus) == (1, 1, 1)
    assert [(c.size, c.status, c.errors) for c in a.comms] == [(1, "RUNNING", "OK")]
    assert a.notes == () and a.collection_s == 0.0


def test_the_captured_json_answer_gives_every_field_of_the_rank():
    a = parse_answer(captured()["json"])
    assert a.format == "json" and a.nccl_version == "2.28.9"
    (c,) = a.comms
    assert c.hash == "5a5605dc3a5f6da2" and c.size == 1 and c.errors == "OK"
    (r,) = c.ranks
    assert (r.rank, r.host, r.pid, r.cuda_dev, r.nvml_dev) == (0, "192.0.2.2", 432, 0, 0)
    assert (r.init_state, r.async_error, r.abort_flag, r.status) == (0, 0, False, "RUNNING")
    assert r.counts == {
        "Broadcast": 0,
        "Reduce": 0,
        "AllGather": 0,
        "ReduceScatter": 0,
        "AllReduce": 0,
    }


@pytest.mark.parametrize("form", ["txt", "json"])
def test_a_rank_behind_is_read_with_its_host_pid_gpu_and_count(form):
    a = parse_answer((DATA / f"behind-4rank.{form}").read_text())
    (c,) = a.comms
    assert c.size == 4 and "MISMATCH" in c.errors
    assert sorted(c.ops["AllReduce"]) == [(812, 1), (813, 3)]
    r1 = c.rank(1)
    assert (r1.host, r1.pid, r1.gpu, r1.counts["AllReduce"]) == ("10.0.0.1", 908, 1, 812)


@pytest.mark.parametrize("form", ["txt", "json"])
def test_a_dead_rank_is_a_missing_rank_marked_dead(form):
    a = parse_answer((DATA / f"dead-4rank.{form}").read_text())
    (c,) = a.comms
    (m,) = c.missing
    assert (m.rank, m.pid, m.host, m.gpu, m.dead) == (3, 5151, "10.0.0.2", 1, True)


@pytest.mark.parametrize("form", ["txt", "json"])
def test_an_asynchronous_error_is_kept_on_its_rank(form):
    a = parse_answer((DATA / f"asyncerror-4rank.{form}").read_text())
    r2 = a.comms[0].rank(2)
    assert r2.async_error == 6 or "Remote process error" in (r2.error or "")
    assert "ERROR" in a.comms[0].errors


def test_the_older_wording_of_nccls_docs_is_read_too():
    a = parse_answer((DATA / "docs-32rank.txt").read_text())
    (c,) = a.comms
    assert sorted(c.ops["collective"]) == [(6649, 6), (6650, 26)]
    assert [r.rank for r in c.ranks] == [0, 2, 3, 4, 5, 7]
    assert all(r.counts["collective"] == 6649 for r in c.ranks)


def test_an_nccl_without_json_answers_text_after_an_error_line():
    old = "ERROR: Unknown command SET FORMAT json\n" + captured()["text"]
    a = parse_answer(old)
    assert a.format == "text" and a.notes[0].startswith("ERROR: Unknown command")


def test_a_large_json_job_keeps_only_the_ranks_that_stand_out():
    import json

    ranks = [
        {
            "rank": i,
            "host": f"10.0.{i // 8}.1",
            "pid": 1000 + i,
            "cuda_dev": i % 8,
            "nvml_dev": i % 8,
            "status": {"init_state": 0, "async_error": 0},
            "collective_counts": {"AllReduce": 6649 if i == 62 else 6650},
        }
        for i in range(4096)
    ]
    doc = {
        "nccl_version": "2.28.9",
        "communicators": [{"hash": "0xab", "size": 4096, "ranks": ranks, "missing_ranks": []}],
    }
    a = parse_answer("OK\n" + json.dumps(doc))
    (c,) = a.comms
    assert [r.rank for r in c.ranks] == [62] and c.ops["AllReduce"] == [(6650, 4095), (6649, 1)]
    assert len(json.dumps(answer_to_dict(a))) < 2000


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*-4rank.*")))
def test_the_record_form_round_trips(name):
    a = parse_answer((DATA / name).read_text())
    assert answer_from_dict(answer_to_dict(a)) == a


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {"format": "xml"},
        {"format": "json", "comms": "x"},
        {"format": "json", "comms": [{"ranks": [{"rank": "one"}]}]},
        {"format": "json", "comms": [{"ops": {"AllReduce": [[1]]}}]},
        {"format": "text", "nodes": True},
    ],
)
def test_a_malformed_record_is_a_value_error_not_a_crash(bad):
    with pytest.raises(ValueError):
        answer_from_dict(bad)


def test_something_else_is_not_taken_for_an_answer():
    for text in ("", "HTTP/1.1 400 Bad Request\r\n", "OK\n{not json"):
        with pytest.raises(ValueError):
            parse_answer(text)


def test_addresses_follow_ncclras_addr():
    assert parse_addr(None) == ("localhost", 28028)
    assert parse_addr("10.1.2.3:29000") == ("10.1.2.3", 29000)
    assert parse_addr("0.0.0.0:28028") == ("127.0.0.1", 28028)
    assert parse_addr("[::1]:28028") == ("::1", 28028)
    for bad in ("localhost", "host:port", ":28028", "h:70000"):
        with pytest.raises(ValueError):
            parse_addr(bad)


# ---------------------------------------------------------------- the client, real sockets


def test_the_client_sends_both_commands_and_reads_json():
    with ras_server(captured()["json"].encode()) as srv:
        q = query_ras(srv.addr)
    assert q.outcome == "done" and q.answer.format == "json"
    assert srv.received == [b"SET FORMAT json\nVERBOSE STATUS\n"]
    assert q.latency_s < 5 and q.nbytes > 500


def test_the_client_reads_the_text_of_an_older_nccl():
    with ras_server(
        ("ERROR: Unknown command SET FORMAT json\n" + captured()["text"]).encode()
    ) as s:
        q = query_ras(s.addr)
    assert q.outcome == "done" and q.answer.format == "text"


ONEGPU = DATA / "onegpu"


def test_a_malformed_json_answer_is_asked_again_as_text():
    """The real answers of NCCL 2.28.9 with rank 1 gone: JSON missing a comma, then text."""
    broken = (ONEGPU / "ras-onegpu-exit-json.txt").read_bytes()
    text = (ONEGPU / "ras-onegpu-exit-text.txt").read_bytes()
    with ras_server(broken, text) as srv:
        q = query_ras(srv.addr)
    assert srv.received == [b"SET FORMAT json\nVERBOSE STATUS\n", b"VERBOSE STATUS\n"]
    assert q.outcome == "done" and q.answer.format == "text"
    assert any("JSON answer was malformed" in n for n in q.answer.notes)
    assert [m.pid for c in q.answer.comms for m in c.missing] == [898]


def test_a_malformed_json_answer_and_no_text_is_garbage_naming_both():
    broken = (ONEGPU / "ras-onegpu-exit-json.txt").read_bytes()
    with ras_server(broken, b"nonsense\n") as srv:
        q = query_ras(srv.addr)
    assert q.outcome == "garbage" and "not valid JSON" in q.error and "text:" in q.error


def test_a_refused_connection_says_nothing_listens():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # a port that is bound but not listening: refused
    port = sock.getsockname()[1]
    try:
        q = query_ras(f"127.0.0.1:{port}")
    finally:
        sock.close()
    assert q.outcome == "refused" and "nothing listens" in q.error


def test_a_peer_that_never_answers_is_a_timeout_within_the_bound():
    with ras_server("silent") as srv:
        start = time.monotonic()
        q = query_ras(srv.addr, total_timeout=1.0)
        took = time.monotonic() - start
    assert q.outcome == "timeout" and "answered nothing" in q.error
    assert 0.9 < took < 3.0


def test_cancelling_stops_a_query_that_waits():
    cancel = threading.Event()
    with ras_server("silent") as srv:
        threading.Timer(0.3, cancel.set).start()
        start = time.monotonic()
        q = query_ras(srv.addr, total_timeout=30, cancel=cancel)
        took = time.monotonic() - start
    assert q.outcome == "cancelled" and took < 3


def test_garbage_is_reported_not_parsed():
    with ras_server(b"\x00\xffhello there\n") as srv:
        q = query_ras(srv.addr)
    assert q.outcome == "garbage" and "not a NCCL RAS answer" in q.error


def test_a_hang_up_before_answering_is_garbage_too():
    with ras_server("close") as srv:
        q = query_ras(srv.addr)
    assert q.outcome in ("garbage", "error") and q.answer is None


def test_a_huge_answer_is_cut_at_the_cap():
    with ras_server(b"x" * (3 << 20)) as srv:
        q = query_ras(srv.addr, max_bytes=1 << 20)
    assert q.outcome == "too_big" and q.nbytes <= (1 << 20) + 65536
