"""Reading PyTorch's debug server: its recorded pages (tests/data/debugserver/README.md), the
sockets that find it, and the explainer's sentences, with no torch job running.

The live end-to-end tests (a real gloo job that starts the server) are in
tests/test_debugserver_live.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gputui.collect.nccl import debugserver as ds
from gputui.collect.nccl import debugserver_ask as ask
from gputui.collect.nccl import debugserver_find as find
from gputui.collect.nccl import debugserver_parse as parse
from gputui.collect.nccl import debugserver_record as record
from gputui.diagnose.evidence import fold
from gputui.diagnose.nccl.debugserver import explain_debugserver
from gputui.diagnose.ranking import Strength
from gputui.diagnose.verdict import Verdict

DATA = Path(__file__).resolve().parent / "data" / "debugserver"
CHECK = ("check", "--json", "--duration", "1", "--interval", "0.25", "--timeout", "2")


def page(name: str) -> str:
    return (DATA / name).read_text()


def recorded(local: dict[int, int] | None = None) -> dict:
    """The record gputui makes of the recorded pages, as if this host were `vm`."""
    stacks = parse.page_sections(page("gloo2-stacks.html"))
    fr, problem = record.fr_by_rank(parse.page_sections(page("gloo2-fr_trace_json.html")))
    assert problem is None
    entries = [record.rank_entry(a, "vm", local or {}, fr) for a in stacks]
    return record.new_record(
        "job-1",
        "stalled",
        "server",
        1000.0,
        server="[::1]:25999",
        ranks=entries,
        world=2,
        found_by="socket of pid 9 (a child of rank 0)",
    )


@contextmanager
def http_answer(answer: bytes | None) -> Iterator[int]:
    """A real socket on 127.0.0.1 that reads one request and sends `answer` (None: holds the
    connection open, silent). Yields its port."""
    srv = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        conn.settimeout(10)
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = conn.recv(4096)
            if not chunk:
                break
            got += chunk
        if answer is None:
            held.append(conn)
            return
        try:
            conn.sendall(answer)
        except OSError:
            pass
        conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()
        for c in held:
            c.close()
        t.join(timeout=10)


def stalled() -> Verdict:
    return Verdict(t=1001.0, state="stalled", spinning=(0,), reason="GPU 0 spins", since=990.0)


# ---------------------------------------------------------------- the pages


def test_the_stacks_page_gives_each_ranks_host_and_main_thread():
    sections = parse.page_sections(page("gloo2-stacks.html"))
    assert [(s.rank, s.host) for s in sections] == [(0, "vm"), (1, "vm")]
    main = [parse.main_frames(parse.threads(s.text or "")) for s in sections]
    assert main[1][0].label() == "load_batch (ds_rank.py:5)"
    assert main[0][0].label() == "all_reduce (torch/distributed/distributed_c10d.py:3252)"
    assert main[0][-1].function == "<module>"  # the whole main thread, innermost first


def test_the_thread_that_answered_is_never_taken_for_the_training_loop():
    ts = parse.threads(parse.page_sections(page("gloo2-stacks.html"))[1].text or "")
    assert [t.current for t in ts] == [True, False]
    assert ts[0].frames == ()  # "<no Python frame>": the worker server's own thread


def test_the_flight_recorder_page_gives_each_ranks_last_collective():
    fr, _ = record.fr_by_rank(parse.page_sections(page("gloo2-fr_trace_json.html")))
    assert fr[0] == [
        {
            "pg": "0",
            "seq": 2,
            "op": "all_reduce",
            "state": "scheduled",
            "desc": "default_pg",
            "enqueued": 2,
            "started": None,
            "completed": 1,
        }
    ]
    assert fr[1][0]["seq"] == 1 and fr[1][0]["enqueued"] == 1


def test_a_periodic_dump_file_reads_like_the_page():
    sections = parse.dump_sections(page("gloo2-stacks-dump.txt"))
    assert [s.rank for s in sections] == [0, 1]
    assert parse.main_frames(parse.threads(sections[1].text or ""))[0].label() == (
        "load_batch (ds_rank.py:5)"
    )


def test_a_rank_the_front_end_could_not_fetch_is_said_not_guessed():
    html = (
        "<h2>Rank 0: http://node-a:1/handler/dump_traceback?</h2><pre>Thread 0x1 (most recent"
        ' call first):\n  File "/t/train.py", line 3 in <module>\n</pre>'
        "<h2>Rank 1: http://node-b:2/handler/dump_traceback?</h2>"
        "<p>Failed to fetch: status=503</p><pre>ConnectionError: refused</pre></section>"
    )
    a, b = parse.page_sections(html)
    assert (b.rank, b.host, b.text, b.status) == (1, "node-b", None, 503)
    entry = record.rank_entry(b, "node-a", {}, {})
    assert entry["outcome"] == "failed" and "HTTP 503" in entry["error"]
    assert a.host == "node-a"


def test_the_confirming_index_page_carries_the_mark():
    assert ask.MARK in page("gloo2-index.html")


# ---------------------------------------------------------------- the explainer


def test_the_rank_outside_any_collective_is_the_culprit_line_and_its_sequence_number_a_mismatch():
    ev = explain_debugserver(recorded(local={0: 4242}), stalled(), None)
    top, line = ev.ranked[0], ev.ranked[1]
    assert top.strength == Strength.MISMATCH and top.ranks == (1,)
    assert top.text == (
        "rank 1 on vm (via the debug server) is behind in process group 0: last entered "
        "all_reduce #1; rank 0 entered all_reduce #2"
    )
    assert top.lead == (
        "rank 1 on vm (via the debug server) is in load_batch (ds_rank.py:5): "
        "rank 0 waits in all_reduce #2"
    )
    assert (line.strength, line.text) == (
        Strength.CULPRIT_LINE,
        "rank 1 on vm (via the debug server) is in load_batch (ds_rank.py:5)",
    )
    # rank 0 is this node's pid 4242: named by its pid, never a suspect (it waits)
    assert "rank 0 (pid 4242 on this node, via the debug server) waits in all_reduce" in " ".join(
        ev.findings
    )
    assert ev.suspect_pids == ()


def test_the_verdict_leads_with_the_debug_servers_line_and_check_json_gets_its_key():
    v = fold(stalled(), [explain_debugserver(recorded(), stalled(), None)])
    assert v.reason.startswith("rank 1 on vm (via the debug server) is in load_batch")
    assert v.culprit_frame == "load_batch (ds_rank.py:5)"
    entry = v.evidence["debugserver"]
    assert entry["server"] == "[::1]:25999" and entry["via"] == "server"
    assert [(r["rank"], r["frame"], r["seq"]) for r in entry["ranks"]] == [
        (0, "main (ds_rank.py:14)", {"0": 2}),
        (1, "load_batch (ds_rank.py:5)", {"0": 1}),
    ]


def test_a_local_culprit_is_named_by_its_pid_and_becomes_a_suspect():
    rec = recorded(local={1: 777})
    ev = explain_debugserver(rec, stalled(), None)
    assert ev.ranked[1].text == (
        "rank 1 (pid 777 on this node, via the debug server) is in load_batch (ds_rank.py:5)"
    )
    assert ev.suspect_pids == (777,)


def test_ranks_at_one_sequence_number_in_different_collectives_are_a_mismatch():
    rec = recorded()
    rec["ranks"][1]["fr"] = [{"pg": "0", "seq": 2, "op": "broadcast", "enqueued": 2}]
    ev = explain_debugserver(rec, stalled(), None)
    assert ev.ranked[0].strength == Strength.MISMATCH
    assert ev.ranked[0].text == (
        "ranks in different collectives at #2 of process group 0 (via the debug server): "
        "rank 0 in all_reduce, rank 1 in broadcast"
    )


def test_a_dump_says_when_it_was_written():
    rec = recorded()
    rec.update(
        via="dump", server=None, dump={"dir": "/d", "file": "stacks_x.txt", "written": 940.0}
    )
    ev = explain_debugserver(rec, stalled(), None)
    assert ev.ranked[0].text.startswith("rank 1 on vm (via the debug server's dump) is behind")
    said = " ".join(ev.findings)
    assert "(60 s before it was read) (stacks_x.txt) answered for 2 ranks" in said


def test_no_answer_is_context_with_the_reason():
    rec = record.new_record(
        "job-1",
        "stalled",
        "server",
        1000.0,
        outcome="absent",
        error="[::1]:25999 (option): connection refused (nothing listens there)",
    )
    ev = explain_debugserver(rec, stalled(), None)
    assert [f.strength for f in ev.ranked] == [Strength.CONTEXT]
    assert ev.findings[0] == (
        "the debug server: no answer: [::1]:25999 (option): connection refused (nothing "
        "listens there)"
    )


@pytest.mark.hostile
@pytest.mark.parametrize(
    "damage",
    [
        {"ranks": "many"},
        {"ranks": [{"rank": -1, "frames": []}]},
        {"ranks": [{"rank": 1, "frames": [["f", "x.py", "9"]]}]},
        {"ranks": [{"rank": 1, "pid": True, "frames": []}]},
        {"outcome": "exploded"},
        {"ranks": [{"rank": 1, "frames": [], "fr": {"pg": "0"}}]},
    ],
)
def test_a_damaged_record_is_one_context_finding(damage):
    rec = {**recorded(), **damage}
    ev = explain_debugserver(rec, stalled(), None)
    assert len(ev.ranked) == 1 and ev.ranked[0].strength == Strength.CONTEXT
    assert ev.findings[0].startswith("the debug server's record could not be read: ")


@pytest.mark.hostile
def test_a_hostile_page_is_bounded():
    deep = "[" * 5000 + "]" * 5000
    with pytest.raises(ValueError, match="nested deeper"):
        parse.bounded_json(deep)
    many = "".join(f"<h2>Rank {i}: http://h:1/x</h2><pre>x</pre>" for i in range(5000))
    assert len(parse.page_sections(many)) == parse.MAX_RANKS
    frames = "Thread 0x1 (most recent call first):\n" + '  File "a.py", line 1 in f\n' * 500
    assert len(parse.threads(frames)[0].frames) == 64
    fr, problem = record.fr_by_rank([parse.RankAnswer(0, "http://h:1/x", deep)])
    assert fr == {} and problem is not None and "nested deeper" in problem


# ---------------------------------------------------------------- finding it


def test_an_address_is_host_port_a_v6_address_in_brackets_or_a_port():
    assert find.parse_addr("node-a:25999") == ("node-a", 25999)
    assert find.parse_addr("[::1]:8000") == ("::1", 8000)
    assert find.parse_addr("25999") == ("127.0.0.1", 25999)
    for bad in ("node-a", "node-a:0", "a b:1", "node:99999", "http://x:1"):
        with pytest.raises(ValueError):
            find.parse_addr(bad)


def test_the_dump_directory_is_read_from_the_ranks_environment_or_command_line():
    envs = [{"HOME": "/root", "TORCH_DEBUG_DUMP_DIR": "/scratch/dbg", "PATH": "/bin"}]
    argv = [["python", "train.py", "--debug-dump-dir", "/scratch/d2"], ["x", "--dump_dir=/s/3"]]
    assert find.dump_dirs(envs, argv) == ["/scratch/dbg", "/scratch/d2", "/s/3"]
    assert find.dump_dirs([{"DUMP_DIR": "relative"}], [["--dump-dir"]]) == []


def test_a_listening_socket_is_found_by_its_inode_in_procs_tables():
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        table = find.listening(os.getpid())
        mine = find.socket_inodes(os.getpid())
        assert ("127.0.0.1", port) in [table[i] for i in mine if i in table]


def test_a_child_of_rank_0_that_listens_is_the_candidate_and_rank_0s_own_sockets_are_not():
    """This test process plays rank 0: its own listening socket is skipped (a worker server,
    a store, gloo), its child's is the candidate."""
    code = (
        "import socket,sys; s=socket.create_server(('127.0.0.1',0)); "
        "print(s.getsockname()[1], flush=True); sys.stdin.read()"
    )
    with socket.create_server(("127.0.0.1", 0)) as own:
        child = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None
            port = int(child.stdout.readline())
            cands = find.front_end_candidates(os.getpid())
            ports = [c.port for c in cands]
            assert port in ports and own.getsockname()[1] not in ports
            c = cands[ports.index(port)]
            assert c.host == "127.0.0.1" and f"pid {child.pid}" in c.found_by
        finally:
            child.kill()
            child.wait(timeout=10)


def test_a_silent_server_costs_one_deadline_and_an_other_server_is_not_taken():
    with http_answer(None) as port:
        c = find.Candidate("127.0.0.1", port, "option")
        t = time.monotonic()
        ok, why = ask.confirm(c, ask.Fetch(threading.Event()))
        assert not ok and why is not None and "timed out" in why
        assert time.monotonic() - t < ask.CONFIRM_S + 2
    answer = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html>grafana</html>"
    with http_answer(answer) as port:
        ok, why = ask.confirm(find.Candidate("127.0.0.1", port, "x"), ask.Fetch())
        assert not ok
        assert why == f"127.0.0.1:{port} answers, but not as PyTorch's debug server (HTTP 200)"


def test_an_answer_larger_than_its_cap_is_refused():
    body = b"x" * (2 << 20)
    answer = b"HTTP/1.0 200 OK\r\n\r\n" + body
    with http_answer(answer) as port, pytest.raises(OSError, match="larger than 1 MiB"):
        ask.Fetch()(find.Candidate("127.0.0.1", port, "x"), "/", 5.0, 1 << 20)


def test_no_sign_of_a_debug_server_is_no_record_but_a_named_one_that_is_absent_says_so(tmp_path):
    assert ds.gather_debugserver("j", "stalled", [], threading.Event()) is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        rec = ds.gather_debugserver(
            "j", "stalled", [], threading.Event(), server=f"127.0.0.1:{port}"
        )
    assert rec is not None and rec["outcome"] == "absent"
    assert "connection refused" in rec["error"]
    rec = ds.gather_debugserver("j", "stalled", [], threading.Event(), dump_dir=str(tmp_path))
    assert rec is not None and rec["outcome"] == "absent" and "no stacks_*.txt" in rec["error"]


def test_the_newest_dump_of_a_directory_is_read(tmp_path):
    old = tmp_path / "stacks_20260101_000000.txt"
    old.write_text("=== Rank 0: http://a:1/x ===\nError: 503\n")
    new = tmp_path / "stacks_20260101_000100.txt"
    new.write_text(page("gloo2-stacks-dump.txt"))
    os.utime(old, (1000, 1000))
    os.utime(new, (2000, 2000))
    rec = ds.read_dump(str(tmp_path), "j", "stalled", {}, 2100.0)
    assert rec is not None and rec["via"] == "dump" and rec["dump"]["file"] == new.name
    assert rec["dump"]["written"] == 2000.0
    assert [e["frames"][0][0] for e in rec["ranks"]] == ["all_reduce", "load_batch"]
    # The front end outlives its ranks: a dump written after they ended holds only errors,
    # and the last one in which they answered is read instead, saying so.
    after = tmp_path / "stacks_20260101_000200.txt"
    after.write_text(
        "=== Rank 0: http://a:1/x ===\nError: 503\n=== Rank 1: http://b:1/x ===\nError: 503\n"
    )
    os.utime(after, (3000, 3000))
    rec = ds.read_dump(str(tmp_path), "j", "gone", {}, 3100.0)
    assert rec is not None and rec["dump"]["file"] == new.name
    assert rec["error"] == "the 1 newer dump(s) hold no rank's stack (the ranks had ended)"


def test_check_reads_a_gone_jobs_last_dump_and_names_its_culprit(tmp_path):
    """No job runs (the stand-in's GPUs are idle): `--debug-dump-dir` still gives the
    line each rank stood at in the server's last dump, stamped with its time."""
    from nvml_standin.build import REPO, build_standin, gputui_argv, standin_env

    (tmp_path / "stacks_20260101_000000.txt").write_text(page("gloo2-stacks-dump.txt"))
    argv = gputui_argv(*CHECK, "--debug-dump-dir", str(tmp_path), alone=True)
    env = standin_env(build_standin(), "")
    r = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert (
        last["reason"]
        == "rank 1 on vm (via the debug server's dump) is in load_batch (ds_rank.py:5)"
    )
    assert last["debugserver"]["via"] == "dump"
    assert last["debugserver"]["dump"]["file"] == "stacks_20260101_000000.txt"
    text = subprocess.run(
        [a for a in argv if a != "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        "the debug server's dump: rank 1 on vm (via the debug server's dump) is in load_batch"
        in text.stdout
    )


def test_a_recording_keeps_the_record_and_its_replay_names_the_same_line(tmp_path):
    """Written by gputui's own trace writer, read back by the bounded reader, explained by
    a Watcher that gathers nothing: the replay says what the live run said."""
    from synth import timeline

    from gputui.collect.trace.format import TraceWriter
    from gputui.collect.trace.read import read_trace
    from gputui.watch.watcher import Watcher

    snaps = list(timeline((0.5, ["compute", "compute"]), (3.0, ["spin", "spin"])))
    rec = {**recorded(), "job": snaps[0].jobs[0].key, "t": snaps[-4].t}
    path = tmp_path / "run.jsonl.gz"
    w = TraceWriter(path)
    for i, s in enumerate(snaps):
        w.write(s)
        if i == len(snaps) - 4:
            w.write_record(rec)
    w.close()
    back = read_trace(path)
    assert [r["type"] for s in back for r in s.records] == ["debugserver"]
    watcher = Watcher(1.0, 60.0, live=False)
    try:
        for s in back:
            v = watcher.update(s)
    finally:
        watcher.close()
    assert v.state == "stalled"
    assert v.reason.startswith(
        "rank 1 on vm (via the debug server) is in load_batch (ds_rank.py:5)"
    )
    assert v.evidence["debugserver"]["server"] == "[::1]:25999"


def test_the_bundle_holds_every_ranks_line_from_the_server(tmp_path):
    from gputui.tools.bundle.write import write_bundle

    v = fold(stalled(), [explain_debugserver(recorded(), stalled(), None)])
    rep = write_bundle(tmp_path / "b", snapshots=[], processes=[], verdict=v, topo_timeout=5)
    assert "debugserver.txt" in rep.files
    text = (tmp_path / "b" / "debugserver.txt").read_text()
    assert "via server [::1]:25999" in text
    assert [ln.split()[0] for ln in text.splitlines()[-2:]] == ["0", "1"]
    assert text.splitlines()[-1].endswith("load_batch (ds_rank.py:5)")
    verdict = json.loads((tmp_path / "b" / "verdict.json").read_text())
    assert verdict["debugserver"]["ranks"][1]["frame"] == "load_batch (ds_rank.py:5)"


def test_the_exporter_says_0_for_a_stalled_job_whose_rank_0_runs_no_debug_server(spawn):
    from synth import with_real_pids

    from gputui.diagnose.hang.detector import Detector
    from gputui.exporter.debugserver_up import DebugServerUp
    from gputui.exporter.view import Watch

    ranks = [spawn(), spawn()]  # real processes as ranks 0 and 1; no child listens
    up = DebugServerUp(every=0.2)
    w = Watch(Detector(stall_after=1.0, hang_after=60.0), host="n", debug=up)
    t = 1000.0
    deadline = time.monotonic() + 20
    try:
        while True:
            w.on_snapshot(with_real_pids(t, [p.pid for p in ranks], ["spin", "spin"]))
            t += 0.25
            view, _ = w.current()
            if view is not None and view.jobs and view.jobs[0].debug_server is not None:
                break
            assert time.monotonic() < deadline, "never asked"
            time.sleep(0.05)
    finally:
        up.close()
    assert view.jobs[0].state == "stalled" and view.jobs[0].debug_server is False
