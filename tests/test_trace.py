"""The recording format: reads calibration files, round-trips gputui's own, rejects bad ones.

The tests marked hostile cover the reader's rule for untrusted files (trace_schema,
trace_read): structural damage is one line naming file and line, an out-of-range reading is
N/A with its reason, every bound is enforced, special files never block, duplicates and time
order, typed records; and the writer: meta line, typed records, bounds, links and devices.
"""

from __future__ import annotations

import gzip
import json

import pytest

from gputui.collect.model import GpuSample, ProcessInfo, RankInfo, Snapshot
from gputui.collect.trace.format import TraceWriter, read_trace
from gputui.errors import GputuiError


def test_demo_recording_reads_as_two_gpu_samples(demo_snaps):
    assert len(demo_snaps) > 500
    assert all(len(s.gpus) == 2 for s in demo_snaps)
    assert demo_snaps[0].t < demo_snaps[-1].t
    phases = {s.phase for s in demo_snaps}
    assert {"train", "comm_heavy", "stall_in_loop", "rank_dies", "serve_idle"} <= phases


def test_demo_hang_sample_has_the_measured_signature(demo_snaps):
    hung = [s for s in demo_snaps if s.phase == "stall_in_loop"][-10]
    g0, g1 = hung.gpus
    assert (g0.util, g0.mem_util) == (100, 0)
    assert g0.power_frac is not None and 0.15 < g0.power_frac < 0.20  # ~122 W of 700 W
    assert g1.util == 0
    ranks = {p.pid: p.rank.rank for p in hung.processes if p.rank}
    assert sorted(ranks.values()) == [0, 1]
    assert len(hung.jobs) == 1 and hung.jobs[0].gpus == (0, 1)


def write_lines(path, rows, gz=False):
    text = "\n".join(json.dumps(r) for r in rows) + "\n"
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)


def test_reads_the_bare_calibration_fields_without_phase(tmp_path):
    rows = []
    for i in range(3):
        for gpu in (0, 1):
            rows.append(
                {
                    "t": 100.0 + i * 0.25,
                    "gpu": gpu,
                    "util": 100 * (gpu == 0),
                    "mem_util": 0,
                    "power_w": 122.0,
                    "sm_mhz": 1980,
                    "mem_used_mb": 3707,
                    "temp": 40,
                    "pstate": 0,
                    "events": 0,
                    "pids": [10 + gpu],
                }
            )
    f = tmp_path / "bare.jsonl"
    write_lines(f, rows)
    snaps = read_trace(f)
    assert len(snaps) == 3
    assert snaps[0].phase is None
    assert snaps[0].gpus[0].power_limit_w is None and snaps[0].gpus[0].power_frac is None
    assert [p.pid for p in snaps[0].processes] == [10, 11]
    assert not snaps[0].processes[0].live


def test_own_format_round_trips_processes_and_ranks(tmp_path):
    proc = ProcessInfo(
        pid=42,
        create_time=5.0,
        user="alice",
        name="python",
        cmdline=("python", "train.py"),
        state="sleeping",
        cpu_percent=3.0,
        rss_mb=100.0,
        ppid=1,
        gpus=(0,),
        gpu_mem_mb=500.0,
        rank=RankInfo(rank=3, world_size=8, master="n1:29500"),
    )
    snap = Snapshot(
        t=10.0,
        gpus=(
            GpuSample(
                index=0,
                name="NVIDIA H200",
                util=50.0,
                power_w=300.0,
                power_limit_w=700.0,
                pids=(42,),
            ),
        ),
        processes=(proc,),
    )
    f = tmp_path / "own.jsonl.gz"
    w = TraceWriter(f)
    w.write(snap)
    w.close()
    (back,) = read_trace(f)
    p = back.processes[0]
    assert (p.pid, p.user, p.cmdline, p.rank.rank, p.rank.master) == (
        42,
        "alice",
        ("python", "train.py"),
        3,
        "n1:29500",
    )
    assert back.gpus[0].power_frac == pytest.approx(300 / 700)
    assert back.jobs[0].key == "master:n1:29500"


def test_a_gzip_recording_cut_short_keeps_its_complete_samples(tmp_path):
    rows = [{"t": 1.0 + i, "gpu": 0, "util": 1} for i in range(50)]
    full = tmp_path / "full.jsonl.gz"
    write_lines(full, rows, gz=True)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(full.read_bytes()[:-12])  # no gzip trailer, as after a kill -9
    assert 0 < len(read_trace(cut)) <= 50


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "no samples"),
        ("not json\n", "not a JSON line"),
        ("[1, 2]\n", "expected a JSON object"),
        ('{"gpu": 0}\n', "missing or non-numeric 't'"),
        ('{"t": 1, "gpu": -1}\n', "invalid 'gpu'"),
        ('{"t": 1, "gpu": 0, "pids": ["x"]}\n', "not a pid"),
    ],
)
def test_bad_files_raise_one_clear_error(tmp_path, content, message):
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    with pytest.raises(GputuiError, match=message):
        read_trace(f)


def test_binary_garbage_and_missing_files_are_errors_not_tracebacks(tmp_path):
    f = tmp_path / "garbage.jsonl.gz"
    f.write_bytes(b"\x00\x01not gzip at all")
    with pytest.raises(GputuiError, match="not a gzip file"):
        read_trace(f)
    with pytest.raises(GputuiError, match="no such file"):
        read_trace(tmp_path / "absent.jsonl")
    with pytest.raises(GputuiError, match="directory"):
        read_trace(tmp_path)


# ---------------------------------------------------------------- the reader's rule


def line(**kw) -> str:
    return json.dumps({"t": 100.0, "gpu": 0, **kw}) + "\n"


def read_text(tmp_path, text: str, name: str = "t.jsonl"):
    f = tmp_path / name
    f.write_text(text, encoding="utf-8", errors="surrogatepass")
    return read_trace(f)


@pytest.mark.hostile
def test_an_out_of_range_reading_becomes_na_with_its_reason(tmp_path):
    text = (
        '{"t":100,"gpu":0,"util":250,"mem_util":5,"power_w":1e999,"power_limit_w":700,'
        '"pstate":7.5,"events":18446744073709551616,"temp":NaN,"sm_mhz":' + "9" * 400 + "}\n"
    )
    (snap,) = read_text(tmp_path, text)
    g = snap.gpus[0]
    assert (g.util, g.power_w, g.pstate, g.events, g.temp_c, g.sm_mhz) == (None,) * 6
    assert (g.mem_util, g.power_limit_w) == (5.0, 700.0)  # the good readings are kept
    assert set(g.na) == {"util", "power_w", "pstate", "events", "temp_c", "sm_mhz"}
    assert "250 is outside 0..100" in g.na["util"]
    assert "not a finite number" in g.na["power_w"]
    assert "not a whole number" in g.na["pstate"]


@pytest.mark.hostile
@pytest.mark.parametrize(
    "fields, message",
    [
        ({"name": 5}, "'name' is a number, expected a string"),
        ({"util": True}, "'util' is a boolean, expected a number"),
        ({"util": "50"}, "'util' is a string, expected a number"),
        ({"pids": [5], "procs": [{"pid": 5, "env": "x"}]}, "'env' is a string"),
        ({"pids": [5], "procs": [{"pid": 5, "state": 5}]}, "'state' is a number"),
        ({"pids": [5], "procs": [{"pid": 5, "cmdline": "python x.py"}]}, "'cmdline' is a string"),
        ({"pids": [5], "procs": [{"pid": 5, "env": {"RANK": 0}}]}, "expected a string"),
        ({"pids": [0]}, "not a pid"),
        ({"pids": [4194305]}, "not a pid"),
        ({"proc_mem": [[5]]}, "[pid, MiB] pairs"),
        ({"pids": list(range(1, 300))}, "more than 256"),
    ],
)
def test_structural_damage_is_one_line_naming_file_and_line(tmp_path, fields, message):
    with pytest.raises(GputuiError) as e:
        read_text(tmp_path, line(util=1) + line(t=100.25, **fields))
    text = str(e.value)
    assert text.startswith(f"{tmp_path / 't.jsonl'}:2: ") and "\n" not in text
    assert message in text


@pytest.mark.hostile
def test_recorded_strings_cannot_reach_the_terminal_as_escapes(tmp_path):
    procs = [{"pid": 5, "cmdline": ["\x1b]0;owned\x07", "ok"], "user": "\ud800x"}]
    (snap,) = read_text(tmp_path, line(name="\x1b[2JGPU", pids=[5], procs=procs))
    assert snap.gpus[0].name == "\ufffd[2JGPU"
    p = snap.processes[0]
    assert p.cmdline == ("\ufffd]0;owned\ufffd", "ok") and p.user == "\ufffdx"


@pytest.mark.hostile
def test_special_files_are_refused_before_any_read_can_block(tmp_path):
    import os
    import threading

    os.mkfifo(tmp_path / "fifo")
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_trace(tmp_path / "fifo")
        except BaseException as e:  # noqa: BLE001 - reported below
            outcome.append(e)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "reading a FIFO blocked"
    assert isinstance(outcome[0], GputuiError) and "FIFO" in str(outcome[0])
    for special, words in (("/dev/zero", "character device"), (str(tmp_path), "directory")):
        with pytest.raises(GputuiError, match=words):
            read_trace(special)


@pytest.mark.hostile
@pytest.mark.parametrize(
    "bound, value, text, message",
    [
        ("MAX_SAMPLES", 3, "".join(line(t=100 + i) for i in range(4)), ":4: more than 3 samples"),
        ("MAX_LINES", 3, "".join(line(t=100 + i) for i in range(4)), ":4: more than 3 lines"),
        ("MAX_BLANK_LINES", 2, line() + "\n \n\n" + line(t=101), ":4: more than 2 blank lines"),
        ("MAX_LINE_BYTES", 40, line() + line(t=101, name="x" * 40), ":2: line longer than"),
        ("MAX_TOTAL_BYTES", 50, line() + line(t=101) + line(t=102), ":3: more than 50 bytes"),
        ("MAX_GPUS_PER_SAMPLE", 2, line() + line(gpu=1) + line(gpu=2), ":3: more than 2 GPUs"),
        (
            "MAX_PROCS_PER_SAMPLE",
            3,
            line(pids=[1, 2]) + line(gpu=1, pids=[3, 4]),
            ":1: more than 3",
        ),
        (
            "MAX_RECORDS",
            1,
            line() + '{"type":"x","t":1}\n{"type":"x","t":2}\n',
            ":3: more than 1 typed",
        ),
        ("MAX_DEPTH", 3, line(x=[[1]]) + line(t=101, x=[[[1]]]), ":2: JSON nested deeper"),
    ],
)
def test_every_bound_is_an_error_naming_the_line(
    tmp_path, monkeypatch, bound, value, text, message
):
    from gputui.collect.trace import schema as trace_schema

    monkeypatch.setattr(trace_schema, bound, value)
    with pytest.raises(GputuiError, match=message.replace("(", r"\(")):
        read_text(tmp_path, text)


@pytest.mark.hostile
def test_nesting_is_measured_without_recursion():
    from gputui.collect.capped import nesting_ok

    assert nesting_ok(b'{"a":[[1],[2]],"b":{"c":[]}}', limit=3)
    assert not nesting_ok(b'{"a":[[[1]]]}', limit=3)
    assert nesting_ok(b'{"a":"[[[[[[[[[[", "b":"\\"[[[["}', limit=1)  # brackets in strings
    assert not nesting_ok(b"[" * 100_000 + b"]" * 100_000, limit=8)
    assert nesting_ok(b"[[[", limit=2)  # unbalanced: left to the JSON parser to report


@pytest.mark.hostile
def test_an_exact_duplicate_line_is_dropped_and_a_conflicting_one_is_an_error(tmp_path):
    a, b = line(util=1), line(gpu=1, util=2)
    assert len(read_text(tmp_path, a + a + b + b)) == 1
    assert len(read_text(tmp_path, a + b + a + b)) == 1
    with pytest.raises(GputuiError, match=r":3: a second, different reading of GPU 0 .*line 1"):
        read_text(tmp_path, a + b + line(util=3))


@pytest.mark.hostile
def test_samples_must_be_in_time_order(tmp_path):
    with pytest.raises(GputuiError, match=":2: time goes backwards"):
        read_text(tmp_path, line(t=100) + line(t=99))
    with pytest.raises(GputuiError, match=":3: time does not advance"):
        read_text(tmp_path, line(t=100.1) + line(t=100.0, gpu=1) + line(t=100.1, gpu=1))
    jitter = line(t=100.0) + line(t=100.1, gpu=1) + line(t=99.95, gpu=2) + line(t=100.25)
    snaps = read_text(tmp_path, jitter)  # lines of one sample may be a little apart
    assert [len(s.gpus) for s in snaps] == [3, 1]


@pytest.mark.hostile
def test_typed_records_attach_to_the_first_sample_at_or_after_their_time(tmp_path):
    meta = '{"type":"meta","t":1,"host":"node-7","gputui":"0.1.0","interval":1}\n'
    early = '{"type":"stacks","t":50,"n":1,"ranks":[]}\n'
    between = '{"type":"stacks","t":100.5,"n":2,"ranks":[]}\n'
    lagging = '{"type":"ras","t":100.0,"n":3}\n'
    late = '{"type":"stacks","t":500,"n":4,"ranks":[]}\n'
    text = meta + early + line(t=100) + between + line(t=101) + line(t=102) + lagging + late
    snaps = read_text(tmp_path, text)
    assert [s.hostname for s in snaps] == ["node-7"] * 3
    assert [[r["n"] for r in s.records] for s in snaps] == [[1, 3], [2], [4]]
    assert snaps[0].records[1] == {"type": "ras", "t": 100.0, "n": 3}  # unchanged


@pytest.mark.hostile
@pytest.mark.parametrize(
    "record, message",
    [
        ('{"type":"meta","t":1,"host":"x"}', "'meta' record may only come first"),
        ('{"type":5,"t":1}', "short lower-case word"),
        ('{"type":"Bad","t":1}', "short lower-case word"),
        ('{"type":"stacks"}', "missing or non-numeric 't'"),
        ('{"type":"stacks","t":1e20}', "plausible Unix time"),
    ],
)
def test_typed_records_with_a_bad_envelope_are_errors(tmp_path, record, message):
    with pytest.raises(GputuiError, match=message):
        read_text(tmp_path, line() + record + "\n")


@pytest.mark.hostile
def test_a_plain_recording_cut_mid_line_keeps_its_complete_lines(tmp_path):
    text = line(t=100) + line(t=101) + line(t=102)[:12]
    assert len(read_text(tmp_path, text)) == 2
    with pytest.raises(GputuiError, match=":2: not a JSON line"):
        read_text(tmp_path, line(t=100) + line(t=101)[:12] + "\n" + line(t=102))


@pytest.mark.hostile
def test_byte_order_mark_crlf_and_gzip_without_its_name_are_read(tmp_path):
    text = line(t=100) + line(t=101)
    assert len(read_text(tmp_path, "\ufeff" + text.replace("\n", "\r\n"))) == 2
    f = tmp_path / "gz-named-plain.jsonl"
    f.write_bytes(gzip.compress(text.encode()))
    assert len(read_trace(f)) == 2


# ---------------------------------------------------------------- the writer


@pytest.mark.hostile
def test_the_writer_starts_with_a_meta_line_and_writes_typed_records(tmp_path):
    f = tmp_path / "w.jsonl"
    w = TraceWriter(f, host="node-7", interval=0.5)
    w.write(Snapshot(t=100.0, gpus=(GpuSample(index=0, util=float("nan")),)))
    w.write_record({"type": "stacks", "t": 100.5, "ranks": []})
    w.write(Snapshot(t=101.0, gpus=(GpuSample(index=0, util=5.0),)))
    w.close()
    first = json.loads(f.read_text().splitlines()[0])
    assert first["type"] == "meta" and first["host"] == "node-7" and first["interval"] == 0.5
    assert "NaN" not in f.read_text()  # written as null
    snaps = read_trace(f)
    assert snaps[0].hostname == "node-7" and snaps[0].gpus[0].util is None
    assert snaps[1].records == ({"type": "stacks", "t": 100.5, "ranks": []},)
    with pytest.raises(ValueError):
        w.write_record({"type": "Not A Word", "t": 1})
    with pytest.raises(ValueError):
        w.write_record({"type": "x", "t": float("inf")})


@pytest.mark.hostile
def test_what_the_writer_writes_always_reads_back(tmp_path):
    """Live data beyond the reader's bounds (huge command lines, too many pids) is cut to
    fit when written, so a recording is never unreadable by its own tool."""
    huge = tuple(f"--arg{i}=" + "x" * 100 for i in range(3000))
    pids = tuple(range(1000, 1400))
    procs = tuple(ProcessInfo(pid=p, cmdline=huge, gpus=(0,), name="n" * 9000) for p in pids[:3])
    snap = Snapshot(t=100.0, gpus=(GpuSample(index=0, pids=pids),), processes=procs)
    f = tmp_path / "big.jsonl.gz"
    w = TraceWriter(f)
    w.write(snap)
    w.close()
    (back,) = read_trace(f)
    assert len(back.gpus[0].pids) == 256
    cmd = back.process(1000).cmdline
    assert 0 < sum(map(len, cmd)) <= 16 * 1024 and cmd[-1].endswith("…")


@pytest.mark.hostile
def test_the_writer_never_follows_a_link_nor_writes_into_a_fifo(tmp_path):
    import os

    from gputui.collect.trace.format import open_output

    (tmp_path / "link").symlink_to(tmp_path / "absent")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "saved").write_text("keep")
    for name, message, kw in (
        ("link", "symbolic link", {}),
        ("fifo", "FIFO", {}),
        (".", "directory", {}),
        ("saved", "exists", {"exclusive": True}),
    ):
        with pytest.raises(GputuiError, match=message):
            open_output(tmp_path / name, **kw)
    assert not (tmp_path / "absent").exists() and (tmp_path / "saved").read_text() == "keep"
    os.close(open_output("/dev/null"))  # a character device is fine


@pytest.mark.hostile
def test_a_full_device_is_a_one_line_error():
    with pytest.raises(GputuiError, match="cannot write /dev/full: No space left on device"):
        TraceWriter("/dev/full")
