"""The recording format: reads calibration files, round-trips gputui's own, rejects bad ones."""

from __future__ import annotations

import gzip
import json

import pytest

from gputui.collect.model import GpuSample, ProcessInfo, RankInfo, Snapshot
from gputui.collect.trace import TraceWriter, read_trace
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
