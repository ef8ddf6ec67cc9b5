"""`dcgmi dmon`'s text as a history file: `check --replay` and `snapshot --replay` read the
log a node running DCGM already keeps (`dcgmi dmon -e 203,204,155,160,150,100,101,252 -d 1000
>> gpu.log`), as they read nvidia-smi's CSV.

The files are written here the way dmon (DCGM 3) prints them: `#Entity` and each field's
short name padded to the field's width + 8 (DCGM's dcgm_fields.cpp: GPUTL, MCUTL, POWER,
PMLMT, FBUSD 10 wide; TMPTR, SMCLK, MMCLK, SMACT 5), a units line, the header again every
14 samples, `N/A` where a reading is blank. The readings of the hang are those of the H200
calibration run: GPU 0 spinning in all_reduce (util 100 %, no memory traffic, ~120 W of
700 W) while GPU 1's rank is stuck on the CPU (util 0, ~70 W)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.collect.source import ReplaySource
from gputui.collect.trace.dcgmi import read_dmon
from gputui.collect.trace.read import read_trace
from gputui.errors import GputuiError

COLUMNS = (("GPUTL", 10, ""), ("MCUTL", 10, ""), ("POWER", 10, "W"), ("PMLMT", 10, "W"),
           ("FBUSD", 10, ""), ("TMPTR", 5, "C"), ("SMCLK", 5, ""), ("SMACT", 5, ""))  # fmt: skip
TRAIN = ("97", "38", "651.208", "700.000", "70112", "61", "1980", "0.912")
SPIN = ("100", "0", "121.870", "700.000", "40213", "45", "1980", "0.012")
STUCK = ("0", "0", "71.250", "700.000", "40100", "33", "345", "0.000")


def _line(first: str, cells) -> str:
    return (
        f"{first:<16}"
        + "".join(f"{c:<{w + 8}}" for c, (_n, w, _u) in zip(cells, COLUMNS, strict=False))
    ).rstrip()


def dmon(samples: list[tuple[tuple[str, ...], ...]], time_line: str | None = None) -> str:
    """dmon's text of these samples (one tuple of cells per GPU each), a `#time` line first."""
    out = [time_line] if time_line else []
    for k, gpus in enumerate(samples):
        if k % 14 == 0:
            out.append(_line("#Entity", [n for n, _w, _u in COLUMNS]))
            out.append(_line("ID", [u for _n, _w, u in COLUMNS]))
        out += [_line(f"GPU {i}", cells) for i, cells in enumerate(gpus)]
    return "\n".join(out) + "\n"


def _hang(train_s: int = 20, hang_s: int = 90) -> list:
    return [(TRAIN, TRAIN)] * train_s + [(SPIN, STUCK)] * hang_s


def _gputui(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_dmon_rows_read_as_the_readings_they_hold(tmp_path):
    path = tmp_path / "gpu.log"
    text = dmon(_hang(2, 1), "#time start=2026-11-28T10:00:00Z d=500")
    mig = _line("GPU-I 3", ["N/A"] * len(COLUMNS))  # a MIG instance's row: skipped
    link = "GPU 0 LINK 3    N/A"  # an NVLink's: skipped
    path.write_text(
        text.replace("\nGPU 1 ", f"\n{mig}\n{link}\nGPU 1 ", 1)
        + "\n\ndmon was stopped due to receiving a signal\n"
    )
    snaps = read_trace(path)
    assert [s.t for s in snaps] == [1_795_860_000.0, 1_795_860_000.5, 1_795_860_001.0]
    g0, g1 = snaps[-1].gpus
    assert (g0.util, g0.mem_util, g0.power_w, g0.power_limit_w) == (100, 0, 121.87, 700)
    assert (g0.mem_used_mb, g0.temp_c, g0.sm_mhz, g0.mem_mhz) == (40213, 45, 1980, None)
    assert (g1.util, g1.power_w) == (0, 71.25)
    assert snaps[-1].processes == () and snaps[-1].readings_only  # dmon lists none


def test_dcgm_2s_right_aligned_table_reads_the_same(tmp_path):
    """DCGM 2 right-aligned its columns (`# Entity`, `Id`) and put a blank line before the
    repeated header."""
    path = tmp_path / "gpu.log"
    head = "# Entity  GPUTL  MCUTL   POWER\n      Id                   W\n"
    rows = "   GPU 0    100      0  121.870\n   GPU 1      0      0   71.250\n"
    path.write_text(head + rows + "\n" + head + rows)
    snaps = read_trace(path)
    assert len(snaps) == 2 and snaps[1].t - snaps[0].t == 1.0
    assert [(g.util, g.power_w) for g in snaps[-1].gpus] == [(100, 121.87), (0, 71.25)]


def test_without_a_time_line_samples_are_a_second_apart_ending_at_the_last_write(tmp_path):
    path = tmp_path / "gpu.log"
    path.write_text(dmon([(TRAIN, TRAIN)] * 30))
    os.utime(path, (1_795_860_100.0, 1_795_860_100.0))
    snaps = read_trace(path)
    assert len(snaps) == 30
    assert snaps[-1].t == 1_795_860_100.0 and snaps[0].t == 1_795_860_071.0


def test_na_and_blank_cells_are_readings_not_available(tmp_path):
    """dmon prints N/A for a blank value and, for a field it has no value of, pads an empty
    cell: the columns are read where the header puts them."""
    path = tmp_path / "gpu.log"
    blank = ("100", "0", "", "N/A", "40213", "45", "1980", "0.010")
    path.write_text(dmon([(blank,)] * 3))
    g = read_trace(path)[-1].gpus[0]
    assert (g.util, g.power_w, g.power_limit_w, g.mem_used_mb) == (100, None, None, 40213)


def test_a_hang_in_dmon_text_names_the_gpu_that_went_quiet(tmp_path):
    """GPU 0 at util 100 %, no memory traffic, low power while GPU 1 idles: the node's GPUs
    in use are taken as one job (dmon lists no processes), and GPU 1 is the suspect."""
    path = tmp_path / "node-3.log"
    path.write_text(dmon(_hang()))
    r = _gputui("check", "--replay", str(path))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout.splitlines()[0].startswith("gputui check: 110 samples over 109.0 s, 2 GPU(s)")
    final = next(line for line in r.stdout.splitlines() if line.startswith("final: "))
    assert final.startswith(
        "final: hung: the file lists no processes: GPUs 0, 1 taken as one job; HUNG: GPU 0"
    ), final
    assert "not spinning: GPU 1 (idle" in final
    last = json.loads(_gputui("check", "--replay", str(path), "--json").stdout.splitlines()[-1])
    assert (last["state"], last["spinning"], last["suspects"]) == ("hung", [0], [1])


def test_a_healthy_run_in_dmon_text_stays_ok_and_snapshot_reads_it(tmp_path):
    path = tmp_path / "gpu.log"
    path.write_text(dmon([(TRAIN, TRAIN)] * 60))
    r = _gputui("check", "--replay", str(path))
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert any(line.startswith("final: ok: no hang") for line in r.stdout.splitlines())
    r = _gputui("snapshot", "--replay", str(path), "--json")
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["verdict"]["state"] == "ok" and [g["util"] for g in shown["gpus"]] == [97, 97]
    src = ReplaySource.from_file(path, realtime=True, lazy=True)  # as the dashboard opens it
    first = src.sample()
    assert first is not None and first.gpus[0].power_limit_w == 700.0
    assert src.next_delay() == pytest.approx(1.0)  # dmon's -d, by default 1000 ms


HEADER = _line("#Entity", [n for n, _w, _u in COLUMNS]) + "\n"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (HEADER + _line("GPU 0", TRAIN) + "\n" + _line("GPU 1", TRAIN[:3]) + "\n",
         ":3: 3 values where the header names 8 (a line cut short?)"),
        ("#Entity   GPUTL  what?  POWER\nGPU 0 1 2 3\n",
         ":1: header: 'what?' is not a DCGM field's short name"),
        ("#Entity   SMACT  SMOCC\nGPU 0 0.1 0.2\n", ":1: header: none of the fields gputui reads"),
        (HEADER + _line("GPU 0", ("lots", *TRAIN[1:])) + "\n",
         "column 'GPUTL': not a number: 'lots'"),
        (HEADER + "banana 0 1 2\n", ":2: not a dcgmi dmon row: 'banana 0 1 2'"),
        ("#time start=yesterday\n" + HEADER, ":1: start=yesterday is not a time"),
        ("#time d=1000\n" + HEADER, "no samples in file"),
        (HEADER + _line("GPU 0", TRAIN), ":2: the last line is cut short (no end of line)"),
    ],
    ids=["cut-short", "garbage-header", "nothing-read", "not-a-number", "not-a-row",
         "bad-time", "empty", "unended"],
)  # fmt: skip
def test_bad_dmon_text_is_one_line_and_exit_2(tmp_path, text, said):
    path = tmp_path / "gpu.log"
    path.write_text(text)
    for cmd in ("check", "snapshot"):
        r = _gputui(cmd, "--replay", str(path))
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "Traceback" not in r.stderr


def test_dcgmi_is_read_only_when_a_history_file_is():
    """The reader is imported by the history path alone: the live dashboard never pays for it."""
    code = (
        "import sys; import gputui.collect.source, gputui.collect.live, gputui.ui.app; "
        "print('gputui.collect.trace.dcgmi' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout.strip()) == (0, "False"), r.stderr


_CI = bool(os.environ.get("CI")) or os.environ.get("GPUTUI_HYPOTHESIS_PROFILE") == "ci"
_LINES = st.one_of(
    st.sampled_from([_line("GPU 0", TRAIN), _line("GPU 1", SPIN), _line("GPU 1", TRAIN[:5]),
                     HEADER.strip(), "ID   W", "#time d=0.5", "#time start=1795860000",
                     "GPU 0 LINK 2  N/A", "GPU-I 0  1 2", "\x1c", "GPU \u0663 1"]),
    st.text(max_size=80).map(lambda t: t.replace("\n", " ")),
)  # fmt: skip


@pytest.mark.hostile
@settings(max_examples=150, deadline=None, database=None, derandomize=_CI,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(st.lists(_LINES, max_size=30), st.booleans())
def test_any_text_after_dmons_header_reads_or_is_one_error(tmp_path, lines, ended):
    """Whatever follows the header, the reader gives columns or one GputuiError: never
    another exception (the faces print that one line and exit 2)."""
    path = tmp_path / "fuzz.log"
    path.write_text(HEADER + "\n".join(lines) + ("\n" if ended else ""), encoding="utf-8")
    try:
        cols = read_dmon(path)
    except GputuiError as e:
        assert "\n" not in str(e)
    else:
        assert len(cols) >= 1 and list(cols.t) == sorted(cols.t)
