"""History files of readings alone (plain GPU lines, nvidia-smi's CSV) are read into columns
(gputui/collect/trace/columns.py), and the Snapshots built from them are the full reader's.

The proof of the fast path is equality: every sample built from the columns equals the one
the full reader (TraceReader) gives for the same file, on the real recordings that are
plain and on a generated foreign file with a hang; a file the fast path does not take is
read by the full reader, error for error. The CSV reader is checked against the same
calibration readings written the way nvidia-smi writes them.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.collect.source import ReplaySource, demo_path
from gputui.collect.trace.columns import ColumnSnaps
from gputui.collect.trace.fast import read_columns
from gputui.collect.trace.read import TraceReader, read_trace
from gputui.errors import GputuiError

DATA = Path(__file__).parent / "data"
CALIBRATION = DATA / "h200x2-trace.jsonl.gz"
FLOOR = ("util", "mem_util", "power_w", "sm_mhz", "mem_used_mb", "temp", "pstate", "events")


@pytest.fixture(params=["msgspec", "json"])
def parser(request, monkeypatch):
    """Each in-process test runs with msgspec (the `history` extra) and without it."""
    from gputui.collect.trace import plain_lines

    if request.param == "json":
        monkeypatch.setattr(plain_lines, "_TYPED", None)
    else:
        pytest.importorskip("msgspec")
    return request.param


def _calibration() -> list[dict]:
    with gzip.open(CALIBRATION, "rt") as f:
        return [json.loads(line) for line in f]


def _foreign_lines(repeat_hang_s: float = 120.0) -> list[dict]:
    """The calibration trace's healthy phases, then its stall (GPU 0 spinning in
    all_reduce, GPU 1's rank stuck on the CPU) held for `repeat_hang_s`, as minimal lines
    4 samples a second: what another tool writes."""
    rows = _calibration()
    healthy = [d for d in rows if d["phase"] in ("train", "comm_heavy", "serve_idle")]
    stall = [d for d in rows if d["phase"] == "stall_in_loop"]
    spin = [
        (a, b)
        for a, b in zip(stall[::2], stall[1::2], strict=False)
        if a["gpu"] == 0
        and a["util"] >= 90
        and a["mem_util"] <= 1
        and a["power_w"] <= 150
        and b["util"] <= 5
    ]
    out, t = [], 1_795_600_000.0
    for a, b in zip(healthy[::2], healthy[1::2], strict=False):
        for d in (a, b):
            out.append({"t": t, "gpu": d["gpu"], **{k: d[k] for k in FLOOR}, "pids": d["pids"]})
        t += 0.25
    for k in range(int(repeat_hang_s * 4)):
        for d in spin[k % len(spin)]:
            out.append({"t": t, "gpu": d["gpu"], **{k: d[k] for k in FLOOR}, "pids": d["pids"]})
        t += 0.25
    return out


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in rows))
    return path


@pytest.mark.parametrize(
    "path", [CALIBRATION, DATA / "h200x4-straggler-4x.jsonl.gz"], ids=lambda p: p.name
)
def test_a_plain_recordings_columns_build_the_full_readers_snapshots(path, parser):
    cols = read_columns(path)
    assert cols is not None
    assert list(ColumnSnaps(cols)) == TraceReader(path).read()


def test_a_foreign_file_with_a_hang_reads_the_same_and_replays_to_the_hang(tmp_path, parser):
    path = _write(tmp_path / "node-3.jsonl", _foreign_lines())
    cols = read_columns(path)
    assert cols is not None
    snaps = ColumnSnaps(cols)
    assert list(snaps) == TraceReader(path).read()
    assert snaps[-1] == snaps[len(snaps) - 1] and snaps[2:4] == [snaps[2], snaps[3]]
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "check", "--replay", str(path), "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["state"] == "hung" and last["spinning"] == [0] and last["suspects"] == [1]


@pytest.mark.parametrize(
    "path",
    [DATA / "h200x2-die-unseen.trace.jsonl.gz", DATA / "h200x4-stuck.trace.jsonl.gz", demo_path()],
    ids=lambda p: p.name,
)
def test_gputuis_own_recordings_are_left_to_the_full_reader(path):
    assert read_columns(path) is None  # processes and typed records: the full reader's


@pytest.mark.parametrize(
    "change",
    [
        "repeat a line",  # the full reader drops an exact repeat
        "util 250",  # out of range: N/A, with its reason
        "util true",  # a bool where a number belongs: an error
        "time backwards",  # an error naming the line
        "a procs list",  # processes: not readings alone
        "NaN",  # json reads it (then N/A), msgspec refuses it: the full reader's either way
        "a 30-digit pid",  # an int past 64 bits: out of range for either parser
        "a lone surrogate",  # json reads it (made printable), msgspec refuses it
        "events past 64 bits",  # a bound msgspec cannot hold: checked after the decode
        "two objects on a line",  # one line, one object: each line is decoded alone
    ],
)
def test_a_file_the_columns_do_not_take_gets_the_full_readers_answer(tmp_path, change, parser):
    rows = _foreign_lines(repeat_hang_s=5)
    lines = [json.dumps(d) for d in rows]
    if change == "repeat a line":
        lines.insert(7, lines[6])
    elif change == "util 250":
        lines[9] = lines[9].replace('"util": ', '"util": 250, "x": ', 1)
    elif change == "util true":
        lines[9] = lines[9].replace('"util": ', '"util": true, "x": ', 1)
    elif change == "time backwards":
        lines[11], lines[21] = lines[21], lines[11]
    elif change == "NaN":
        lines[9] = lines[9].replace('"util": ', '"util": NaN, "x": ', 1)
    elif change == "a 30-digit pid":
        lines[9] = lines[9].replace('"pids": [', '"pids": [123456789012345678901234567890, ', 1)
    elif change == "events past 64 bits":
        lines[9] = lines[9][:-1] + f', "events": {2**64}}}'
    elif change == "two objects on a line":
        lines[9] = lines[9] + ", " + lines[10]
    elif change == "a lone surrogate":
        lines[9] = lines[9][:-1] + ', "phase": "x\\ud800y"}'
    else:
        lines[3] = lines[3][:-1] + ', "procs": []}'
    path = tmp_path / "f.jsonl"
    path.write_text("\n".join(lines) + "\n")
    if change != "a lone surrogate" or parser == "msgspec":
        assert read_columns(path) is None  # json reads that one: made printable, as the full
    try:
        want: object = TraceReader(path).read()
    except GputuiError as e:
        want = str(e)
    try:
        got: object = read_trace(path)
    except GputuiError as e:
        got = str(e)
    assert got == want


def test_a_replay_of_columns_plays_from_its_start_without_building_every_sample(tmp_path):
    path = _write(tmp_path / "n.jsonl", _foreign_lines(repeat_hang_s=5))
    src = ReplaySource.from_file(path, realtime=False, start_s=10.0)
    assert isinstance(src.snaps, ColumnSnaps)
    first = src.sample()
    assert first is not None and first.t - src.snaps.times[0] >= 10.0
    assert src.node == "n"


# ---------------------------------------------------------------- nvidia-smi's CSV

HEADER = (
    "timestamp, index, utilization.gpu [%], utilization.memory [%], power.draw [W], "
    "power.limit [W], memory.used [MiB], temperature.gpu, clocks.current.sm [MHz]"
)


def _csv(rows: list[dict], units: bool = True) -> str:
    out = [HEADER]
    for d in rows:
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(d["t"]))
        stamp += f".{round(d['t'] * 1000) % 1000:03d}"
        u = (lambda s: s) if units else (lambda s: s.split(" ")[0])
        out.append(
            ", ".join([
                stamp, str(d["gpu"]), u(f"{d['util']} %"), u(f"{d['mem_util']} %"),
                u(f"{d['power_w']:.2f} W"), u("700.00 W"), u(f"{d['mem_used_mb']} MiB"),
                str(d["temp"]), "[N/A]" if d["gpu"] else u(f"{d['sm_mhz']} MHz"),
            ])
        )  # fmt: skip
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("units", [True, False], ids=["csv", "csv,nounits"])
def test_nvidia_smi_csv_reads_as_the_readings_it_holds(tmp_path, units):
    rows = _foreign_lines(repeat_hang_s=20)
    path = tmp_path / "smi.csv"
    path.write_text(_csv(rows, units))
    snaps = read_trace(path)
    assert len(snaps) == len(rows) // 2
    g0, g1 = snaps[-1].gpus
    src0, src1 = rows[-2], rows[-1]
    assert (g0.util, g0.mem_util, g0.power_w, g0.power_limit_w) == (
        src0["util"], src0["mem_util"], round(src0["power_w"], 2), 700.0,
    )  # fmt: skip
    assert g0.sm_mhz == src0["sm_mhz"] and g1.sm_mhz is None  # [N/A]
    assert g1.mem_used_mb == src1["mem_used_mb"] and g1.temp_c == src1["temp"]
    assert snaps[-1].processes == ()  # this query lists none


def _check(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputui", "check", "--replay", str(path), *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_hang_in_nvidia_smi_csv_names_the_gpu_that_went_quiet(tmp_path):
    """nvidia-smi's GPU query lists no processes, so no job can be told from another: the
    node's GPUs in use are taken as one job, said so, and the GPU that went idle while its
    peer spun is the suspect: the verdict a user reading a cron log after a page expects."""
    path = tmp_path / "node-9.csv"
    path.write_text(_csv(_foreign_lines(repeat_hang_s=90)))
    r = _check(path)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout.splitlines()[0].endswith("2 GPU(s) on node-9"), r.stdout  # the file's name
    final = next(line for line in r.stdout.splitlines() if line.startswith("final: "))
    assert final.startswith(
        "final: hung: the file lists no processes: GPUs 0, 1 taken as one job; HUNG: GPU 0"
    ), final
    assert "not spinning: GPU 1 (idle" in final
    last = json.loads(_check(path, "--json").stdout.splitlines()[-1])
    assert (last["state"], last["spinning"], last["suspects"]) == ("hung", [0], [1])


def test_plain_lines_without_pids_are_judged_as_the_csv_is(tmp_path):
    rows = [{k: v for k, v in d.items() if k != "pids"} for d in _foreign_lines(90)]
    r = _check(_write(tmp_path / "node-4.jsonl", rows))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "final: hung: the file lists no processes: GPUs 0, 1 taken as one job" in r.stdout


@pytest.mark.parametrize("what", ["healthy", "idle"])
def test_a_csv_of_a_healthy_run_or_an_idle_node_stays_ok(tmp_path, what):
    """Taking the GPUs as one job blames nobody where nothing spins: a training run (every
    GPU busy) and a node with nothing on it (no GPU in use: no member at all)."""
    rows = [d for d in _foreign_lines(repeat_hang_s=0)]
    if what == "idle":
        quiet = {"util": 0, "mem_util": 0, "power_w": 75.0, "mem_used_mb": 1}
        rows = [{**d, **quiet} for d in rows]
    path = tmp_path / "node-2.csv"
    path.write_text(_csv(rows))
    r = _check(path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    final = next(line for line in r.stdout.splitlines() if line.startswith("final: "))
    assert final.startswith("final: ok: no hang"), final
    assert "taken as one job" not in r.stdout


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("timestamp, utilization.gpu [%]\n2026/11/22 10:15:01.123, 5 %\n", "no 'index' column"),
        (HEADER + "\n2026/11/22 10:15:01.123, 0, 5 %\n", "3 fields where the header names 9"),
        (
            HEADER + "\n2026/11/22 10:15:01.123, 0, lots, 0 %, 80 W, 700 W, 1 MiB, 30, 345 MHz\n",
            "column 'utilization.gpu [%]': not a number: 'lots'",
        ),
        (HEADER + "\nyesterday, 0, 1 %, 0 %, 80 W, 700 W, 1 MiB, 30, 345 MHz\n", "timestamp"),
        (
            HEADER + "\n2026/11/22 10:15:02.000, 0, 1 %, 0 %, 80 W, 700 W, 1 MiB, 30, 345 MHz"
            "\n2026/11/22 10:15:01.000, 0, 1 %, 0 %, 80 W, 700 W, 1 MiB, 30, 345 MHz\n",
            "time goes backwards",
        ),
        (HEADER + "\n" + "9" * 100_000 + "\n", "line longer than"),
        (HEADER + "\n", "no samples in file"),
    ],
    ids=["no-index", "short-row", "garbage", "bad-time", "backwards", "huge-line", "empty"],
)
def test_a_bad_nvidia_smi_csv_is_one_line_and_exit_2(tmp_path, text, said):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    for cmd in (["check"], ["snapshot"]):
        r = subprocess.run(
            [sys.executable, "-m", "gputui", *cmd, "--replay", str(path)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "Traceback" not in r.stderr


def test_every_face_that_replays_reads_the_csv(tmp_path):
    """snapshot (its window of history) and the dashboard's and the exporter's source."""
    rows = _foreign_lines(repeat_hang_s=20)
    path = tmp_path / "gpu-log.csv"
    path.write_text(_csv(rows))
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "snapshot", "--replay", str(path), "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr  # the verdict's code: GPU 0 has spun 20 s
    shown = json.loads(r.stdout)
    assert shown["verdict"]["state"] == "stalled" and shown["verdict"]["suspects"] == [1]
    assert [g["util"] for g in shown["gpus"]] == [rows[-2]["util"], rows[-1]["util"]]
    assert shown["hostname"] is None and shown["processes"] == []
    src = ReplaySource.from_file(path, realtime=True, lazy=True)  # as the dashboard opens it
    first = src.sample()
    assert first is not None and first.gpus[0].power_limit_w == 700.0
    assert src.next_delay() == pytest.approx(0.25)


def test_the_live_dashboard_does_not_import_the_history_path():
    """msgspec and the columns are imported when a history file is read, never before: the
    live dashboard's first frame and memory do not pay for them."""
    history = ["msgspec", "gputui.collect.trace.columns", "gputui.collect.trace.plain_lines",
               "gputui.collect.trace.smi_csv", "gputui.collect.trace.fast"]  # fmt: skip
    code = (
        "import sys, json; import gputui.collect.source, gputui.collect.live, gputui.ui.app; "
        f"print(json.dumps([m for m in {history!r} if m in sys.modules]))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []


def test_a_moment_deep_in_a_hang_reaches_back_to_its_start_without_a_list(tmp_path):
    """The window of a file held as columns is a view: a moment 10 minutes into a hang
    reaches back to where the spin began, and says what the whole replay says there."""
    from gputui.collect.trace.columns import SnapsView
    from gputui.collect.trace.window import read_moment
    from gputui.commands.moment import verdicts
    from gputui.diagnose.hang.classify import GpuState, classify_gpu

    path = _write(tmp_path / "deep.jsonl", _foreign_lines(repeat_hang_s=600))

    def calm(snap) -> bool:
        return all(classify_gpu(g) != GpuState.SPINNING for g in snap.gpus)

    m = read_moment(path, None, 60.0, calm)
    assert isinstance(m.snaps, SnapsView) and len(m.snaps) > 600 * 4
    whole = verdicts(TraceReader(path).read())[-1]
    mine = verdicts(m.snaps)[-1]
    # The state and the spin's start are the whole replay's. (Its reason names fewer
    # departed pids: the window starts where the spin began, and pids that left before
    # that are not in it; so it was before the columns, the same words from both readers.)
    assert (mine.state, mine.since, mine.spinning) == (whole.state, whole.since, whole.spinning)
    assert mine.state == "hung"
