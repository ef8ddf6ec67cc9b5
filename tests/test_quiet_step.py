"""The quiet step of a replay of columns (gputui/watch/run.py, QuietSteps) changes nothing printed.

Two proofs. First, the per-sample code read straight from the columns
(gputui/diagnose/quiet_code.py) is what the detector's own functions give on the Snapshot of
the same sample, at every sample of every recording read as columns. Second, `check
--replay` (text and --json, with the default and with short --stall-after/--hang-after) prints
byte for byte the same and exits the same with the quiet step on and off
(GPUTUI_REPLAY_QUIET=0), over the recordings in tests/data that read as columns, foreign
files made by bench/foreign_history.py's generator (hangs early, late, and at the end of the
file), the same samples as nvidia-smi's CSV, and dcgmi dmon text with a hang.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.source import FilteredSource, ReplaySource
from gputui.collect.trace.columns import ColumnSnaps
from gputui.collect.trace.fast import read_columns
from gputui.diagnose.hang.classify import GpuState, classify_node
from gputui.diagnose.hang.detector import Detector
from gputui.diagnose.job_groups import in_use
from gputui.diagnose.quiet_code import CodeReader
from gputui.diagnose.slow.straggler import _refs, is_waiting
from gputui.watch.run import QUIET_ENV, WatchRun, quiet_steps, replay_settings

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
RECORDED = [DATA / "h200x2-trace.jsonl.gz", DATA / "h200x4-straggler-4x.jsonl.gz"]


def _bench() -> Any:
    """bench/foreign_history.py, for its generator of foreign files."""
    path = ROOT / "bench" / "foreign_history.py"
    spec = importlib.util.spec_from_file_location("foreign_history", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# (name, samples, where the hang starts (fraction of the file), how long it lasts, seconds)
FOREIGN = [
    ("hang-mid", 1600, 0.5, 60.0),
    ("hang-early", 1200, 0.1, 30.0),
    ("ends-in-a-hang", 1000, 0.8, 1000.0),
]

COLUMNS = (("GPUTL", 10, ""), ("MCUTL", 10, ""), ("POWER", 10, "W"), ("PMLMT", 10, "W"),
           ("FBUSD", 10, ""), ("TMPTR", 5, "C"), ("SMCLK", 5, ""), ("SMACT", 5, ""))  # fmt: skip
TRAIN = ("97", "38", "651.208", "700.000", "70112", "61", "1980", "0.912")
SPIN = ("100", "0", "121.870", "700.000", "40213", "45", "1980", "0.012")
STUCK = ("0", "0", "71.250", "700.000", "40100", "33", "345", "0.000")


def _dmon(samples: list[tuple[tuple[str, ...], ...]]) -> str:
    """`dcgmi dmon -e ...` text of these samples, its header every 14 samples."""

    def line(first: str, cells: Any) -> str:
        pairs = zip(cells, COLUMNS, strict=False)
        return (f"{first:<16}" + "".join(f"{c:<{w + 8}}" for c, (_n, w, _u) in pairs)).rstrip()

    out = []
    for k, gpus in enumerate(samples):
        if k % 14 == 0:
            out.append(line("#Entity", [n for n, _w, _u in COLUMNS]))
            out.append(line("ID", [u for _n, _w, u in COLUMNS]))
        out += [line(f"GPU {i}", cells) for i, cells in enumerate(gpus)]
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every history file of the proof, by name: recorded, generated, CSV and dmon."""
    d = tmp_path_factory.mktemp("quiet")
    bench = _bench()
    out = {p.name: p for p in RECORDED}
    for name, n, at, hang_s in FOREIGN:
        bench.HANG_AT, bench.HANG_S = at, hang_s  # samples() reads them
        out[name] = d / f"node-{name}.jsonl"
        bench.make_jsonl(out[name], n)
    bench.HANG_AT, bench.HANG_S = 0.5, 60.0
    out["smi.csv"] = d / "node-smi.csv"
    bench.make_csv(out["smi.csv"], 1200)
    dmon = [(TRAIN, TRAIN)] * 60 + [(SPIN, STUCK)] * 90 + [(TRAIN, TRAIN)] * 40
    out["dmon"] = d / "node-dmon.log"
    out["dmon"].write_text(_dmon(dmon))
    return out


NAMES = [p.name for p in RECORDED] + [f[0] for f in FOREIGN] + ["smi.csv", "dmon"]


@pytest.mark.parametrize("name", NAMES)
def test_the_code_read_from_columns_is_what_the_detector_reads_of_each_sample(files, name):
    cols = read_columns(files[name])
    assert cols is not None, "read through columns"
    snaps = ColumnSnaps(cols)
    reader = CodeReader(cols, snaps.ends)
    det = Detector()
    for k, snap in enumerate(snaps):
        det.update(snap)
        groups = sorted(det.memory.groups.values(), key=lambda g: -len(g.members))
        peers = [g.present(snap) for g in groups if len(g.members) >= 2]
        refs = _refs(snap, groups)
        states = classify_node(snap.gpus)
        want = tuple(
            (
                g.index,
                g.pids,
                states[g.index] is GpuState.SPINNING,
                is_waiting(g, refs.get(g.index)),
                in_use(g),
            )
            for g in snap.gpus
        )
        assert reader.code(k, peers) == want, f"sample {k}"


def test_the_quiet_step_takes_most_samples_of_a_foreign_file(files):
    """Not a vacuous proof: most samples of a churning job's history are quiet ones."""
    src = ReplaySource.from_file(files["hang-mid"], realtime=False)
    with WatchRun(replay_settings()) as run:
        quiet = quiet_steps(src, run.watcher)
        assert quiet is not None
        n = 0
        while (snap := src.sample()) is not None:
            n += 1 + quiet.skip(run.step(snap))
    assert n == len(src.snaps)
    assert quiet.quiet > 0.6 * n, (quiet.quiet, n)


def test_the_switch_turns_it_off_and_other_sources_never_take_it(files, monkeypatch):
    src = ReplaySource.from_file(files["hang-mid"], realtime=False)
    with WatchRun(replay_settings()) as run:
        assert quiet_steps(src, run.watcher) is not None
        monkeypatch.setenv(QUIET_ENV, "0")
        assert quiet_steps(src, run.watcher) is None
        monkeypatch.delenv(QUIET_ENV)
        full = ReplaySource.from_file(DATA / "h200x4-stuck.trace.jsonl.gz", realtime=False)
        assert quiet_steps(full, run.watcher) is None  # gputui's own recording: no columns
        some = FilteredSource(src, (0,))  # --gpus 0: the Watcher sees GPU 0 alone
        assert quiet_steps(some, run.watcher) is None


def _gputui(args: list[str], quiet: bool) -> tuple[int, str, str]:
    env = {**os.environ, QUIET_ENV: "1" if quiet else "0"}
    r = subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    return r.returncode, r.stdout, r.stderr


VARIANTS = [[], ["--json"], ["--stall-after", "4", "--hang-after", "12", "--json"],
            ["--stall-after", "4", "--hang-after", "12"], ["--gpus", "0"]]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_check_replay_prints_the_same_with_the_quiet_step_on_and_off(files, name):
    for extra in VARIANTS:
        args = ["check", "--replay", str(files[name]), *extra]
        on, off = _gputui(args, quiet=True), _gputui(args, quiet=False)
        assert on == off, (extra, on, off)
        assert on[0] in (0, 1, 3, 4), on  # a verdict, not an error


def _shifted(src: Path, dst: Path, how: str) -> Path:
    """`src`'s lines with GPU 1's times 50 ms late (one sample still: the reader's rule
    takes lines 0.2 s apart as one), or with one line written twice."""
    lines = src.read_text().splitlines(keepends=True)
    if how == "jitter":
        import json

        rows = [json.loads(line) for line in lines]
        lines = [
            json.dumps({**d, "t": round(d["t"] + 0.05, 3)} if d["gpu"] == 1 else d) + "\n"
            for d in rows
        ]
    else:
        lines.insert(701, lines[700])
    dst.write_text("".join(lines))
    return dst


@pytest.mark.parametrize("how", ["as-written", "jitter", "repeat"])
def test_samples_read_by_runs_of_one_time_are_the_full_readers(files, tmp_path, monkeypatch, how):
    """The plain reader groups a block's lines into samples in C when each sample's lines
    share one time (plain_lines._runs), else line by line: blocks made small so that
    samples straddle them, both ways give the full reader's samples, and a repeated line is
    still left to the full reader."""
    from gputui.collect.trace import plain_lines
    from gputui.collect.trace.read import TraceReader

    monkeypatch.setattr(plain_lines, "BLOCK_BYTES", 4096)
    path = files["hang-mid"]
    if how != "as-written":
        path = _shifted(path, tmp_path / f"{how}.jsonl", how)
    cols = read_columns(path)
    if how == "repeat":
        assert cols is None
        return
    assert cols is not None
    assert list(ColumnSnaps(cols)) == TraceReader(path).read()


@pytest.mark.parametrize(
    "args",
    [
        ["snapshot", "--replay", "{hang-mid}", "--at", "240"],
        ["snapshot", "--replay", "{ends-in-a-hang}", "--at", "230", "--json"],
        ["snapshot", "--replay", "{smi.csv}", "--json"],
        ["check", "--demo", "--json"],
    ],
    ids=["snapshot-at", "snapshot-at-json", "snapshot-csv", "check-demo"],
)
def test_the_other_replays_print_the_same_with_the_switch_on_and_off(files, args):
    """`snapshot` judges its window in full and the demo is no file of columns: the switch
    changes nothing there either."""
    args = [files[a[1:-1]].as_posix() if a.startswith("{") else a for a in args]
    on, off = _gputui(args, quiet=True), _gputui(args, quiet=False)
    assert on == off, (on, off)
    assert on[0] in (0, 1, 3, 4), on
