"""A GPU line read from its template gives what the full reader gives, byte for byte.

gputui.collect.trace.template reads a line that repeats a checked line but for its readings
by matching it against that line's bytes and parsing only the numbers (issue 34: a day-long
replay at 50 us a line). These tests hold the promise that makes it safe: the fast path and
the full reader (TraceReader(templates=False)) agree on every recording in tests/data, on
`check --replay --json`, and on hostile lines whose every byte but one reading is a
learned template's, whether that reading is fine, out of range, or not a number at all.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.collect.trace import schema
from gputui.collect.trace.read import TraceReader
from gputui.errors import GputuiError

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
RECORDINGS = sorted(DATA.rglob("*.jsonl.gz")) + [
    REPO / "gputui" / "data" / "demo-h200x2-hang.jsonl.gz"
]


def read_both(path: Path) -> tuple[object, object, TraceReader]:
    """(fast outcome, full outcome, the fast reader): each is the samples with what the
    reader noted, or the error it raised."""
    out = []
    readers = []
    for templates in (True, False):
        reader = TraceReader(path, templates=templates)
        readers.append(reader)
        try:
            snaps = reader.read()
            out.append((repr(snaps), reader.notes(), reader.dropped, reader.skipped))
        except GputuiError as e:
            out.append(("error", str(e)))
    return out[0], out[1], readers[0]


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_every_recording_reads_the_same_from_templates(path: Path) -> None:
    fast, full, reader = read_both(path)
    assert fast == full
    assert reader.templates is not None and reader.templates.hits > 0, "no line was reused"


def _check_json(path: Path, templates: bool) -> str:
    """`gputui check --replay PATH --json`, in a child whose reader has templates or not."""
    code = (
        "import sys\n"
        "from gputui.collect.trace import read\n"
        "if sys.argv[2] == 'full':\n"
        "    class Never(read.LineTemplates):\n"
        "        def row(self, raw): return None\n"
        "    read.LineTemplates = Never\n"
        "from gputui.cli import main\n"
        "sys.exit(main(['check', '--replay', sys.argv[1], '--json']))\n"
    )
    mode = "templates" if templates else "full"
    r = subprocess.run(
        [sys.executable, "-c", code, str(path), mode],
        capture_output=True, text=True, timeout=120, cwd=REPO, check=False,
    )  # fmt: skip
    return f"exit {r.returncode}\n{r.stdout}{r.stderr}"


@pytest.mark.parametrize(
    "name", ["h200x4-stuck.trace.jsonl.gz", "h200x4-xid.trace.jsonl.gz", "h200x2-trace.jsonl.gz"]
)
def test_check_replay_says_the_same_lines_with_and_without_templates(name: str) -> None:
    """The verdict lines, their times, the health and the exit code: all the same."""
    fast = _check_json(DATA / name, templates=True)
    assert fast == _check_json(DATA / name, templates=False)
    assert fast.startswith(("exit 1", "exit 3"))  # a hang, an Xid: something was said


# ------------------------------------------------------------------ hostile lines

_LINE = {
    "t": 1795400000.0, "gpu": 0, "util": 97.0, "mem_util": 35.0, "power_w": 245.088,
    "power_limit_w": 700.0, "mem_used_mb": 43356.0, "mem_total_mb": 143771.0, "temp": 45,
    "sm_mhz": 1980, "mem_mhz": 3201, "pstate": 0, "events": 0, "pids": [4000],
    "name": "NVIDIA H200", "uuid": "GPU-549afb26", "proc_mem": [[4000, 40000.0]],
    "procs": [{
        "pid": 4000, "create_time": 1795424365.96, "user": "root", "name": "python3",
        "cmdline": ["python3", "train.py"], "state": "running", "cpu": 103.4,
        "rss_mb": 9044.9322, "ppid": 3999, "parent_cmd": "torchrun train.py",
        "gpu_mem_mb": 40000.0,
        "env": {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"},
    }],
}  # fmt: skip


def _text(t: float, **changes: object) -> str:
    """A GPU line as the writer spells it (compact JSON), at time `t`."""
    d = json.loads(json.dumps(_LINE))
    d["t"] = t
    d.update(changes)
    return json.dumps(d, separators=(",", ":"))


def _moved(t: float) -> str:
    """A line whose every reading moved: a template learned from it, after a first line
    whose readings differ, has them all as slots."""
    procs = json.loads(json.dumps(_LINE["procs"]))
    procs[0].update(cpu=99.5, rss_mb=9045.5, gpu_mem_mb=40001.0)
    return _text(
        t, util=96.0, mem_util=34.0, power_w=250.5, power_limit_w=699.0, mem_used_mb=43357.0,
        mem_total_mb=143770.0, temp=46, sm_mhz=1975, mem_mhz=3200, procs=procs,
    )  # fmt: skip


T_LAST = _LINE["t"] + 3


def _recording(tmp_path: Path, last: str) -> Path:
    """Three ordinary samples (the first two are learned, the third is read from the
    second's template), then `last`: a line that matches that template everywhere but where
    it was changed."""
    lines = [_text(_LINE["t"]), _moved(_LINE["t"] + 1), _text(_LINE["t"] + 2), last]
    path = tmp_path / "r.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    return path


def _swap(key: str, token: str, *, in_proc: bool = False) -> str:
    """The last sample's line with the number of `key` spelled `token` (raw JSON text)."""
    marker = 987654.25  # a number nothing else in the line holds
    if in_proc:
        procs = json.loads(json.dumps(_LINE["procs"]))
        procs[0][key] = marker
        text = _text(T_LAST, procs=procs)
    elif key == "t":
        text = _text(marker)
    else:
        text = _text(T_LAST, **{key: marker})
    assert text.count(str(marker)) == 1
    return text.replace(str(marker), token)


TOKENS = [
    "50", "50.5", "0", "0.0", "1e2", "2.5E-3",  # fine: the template's path
    "250", "1e999", "-5", "-0", "-0.0", "1" * 400, "9" * 16,  # out of range, or edge
    '"97"', "true", "false", "null", "NaN", "Infinity", "-Infinity",  # not a number
    "[1]", "{}", "01", "1.", ".5", "1e", "+1",  # not JSON, or not a number JSON allows
]  # fmt: skip
GPU_KEYS = ["t", "util", "power_w", "mem_used_mb", "temp", "pstate", "gpu"]
PROC_KEYS = ["cpu", "rss_mb", "gpu_mem_mb", "pid", "ppid", "create_time"]


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("key", GPU_KEYS + PROC_KEYS)
def test_a_changed_reading_reads_as_the_full_reader_reads_it(
    tmp_path: Path, key: str, token: str
) -> None:
    """Whatever a reading is changed to (a number in or out of range, a string, a bool,
    a bad number): the same samples or the same error as the full reader."""
    path = _recording(tmp_path, _swap(key, token, in_proc=key in PROC_KEYS))
    fast, full, reader = read_both(path)
    assert fast == full
    assert reader.templates is not None and reader.templates.hits >= 1


@pytest.mark.parametrize(
    "last",
    [
        _text(T_LAST, name="NVIDIA H200\u001b[31m"),  # an escape in a string
        _text(T_LAST, uuid="GPU-\ud800"),  # a lone surrogate
        _text(T_LAST).replace('"util":97.0', '"util":97.0,"util":"x"'),  # twice
        _text(T_LAST).replace('"util":97.0', '"util": 97.0'),  # a space
        _text(T_LAST).replace('"pids":[4000]', '"pids":[4000.0]'),  # a float pid
        _text(T_LAST).replace('"RANK":"0"', '"RANK":0'),  # a number for a string
        _text(T_LAST, procs=[_LINE["procs"][0], _LINE["procs"][0]]),  # a pid twice
        _text(T_LAST)[:-1],  # cut short
        _text(_LINE["t"] + 2),  # the last line again: a duplicate, dropped
        _text(_LINE["t"] + 2).replace('"util":97.0', '"util":96.0'),  # same t, different
        _text(_LINE["t"] - 5),  # time goes backwards
    ],
    ids=[
        "escape", "surrogate", "duplicate-key", "space", "float-pid", "number-for-string",
        "pid-twice", "cut-short", "duplicate-line", "second-reading", "backwards",
    ],
)  # fmt: skip
def test_a_line_that_differs_elsewhere_reads_as_the_full_reader_reads_it(
    tmp_path: Path, last: str
) -> None:
    fast, full, _ = read_both(_recording(tmp_path, last))
    assert fast == full


def test_a_string_where_a_reading_was_is_still_an_error(tmp_path: Path) -> None:
    """The plainest case, said outright: the template's bytes all match but one reading
    is a string; the line is refused with the full reader's words."""
    path = _recording(tmp_path, _swap("util", '"97"'))
    with pytest.raises(GputuiError, match=r"r\.jsonl\.gz:4: 'util' is a string, expected a number"):
        TraceReader(path).read()


def test_an_out_of_range_reading_is_na_with_its_reason(tmp_path: Path) -> None:
    snaps = TraceReader(_recording(tmp_path, _swap("util", "250"))).read()
    gpu = snaps[-1].gpus[0]
    assert gpu.util is None
    assert gpu.na == {"util": "recorded value 250 is outside 0..100"}
    assert snaps[-2].gpus[0].util == 97.0 and snaps[-2].gpus[0].na == {}


@pytest.mark.parametrize(
    ("key", "token"), [("util", "50"), ("power_w", "2.5E-3"), ("cpu", "50.5"), ("rss_mb", "1e2")]
)
def test_a_new_reading_in_range_is_read_from_the_template(
    tmp_path: Path, key: str, token: str
) -> None:
    """The fast path is taken where it should be: the third and the last lines."""
    reader = TraceReader(_recording(tmp_path, _swap(key, token, in_proc=key in PROC_KEYS)))
    reader.read()
    assert reader.templates is not None and reader.templates.hits == 2


@pytest.mark.parametrize("key", sorted(schema.PROC_READINGS))
def test_a_process_reading_at_its_bound_reads_as_the_full_reader_reads_it(
    tmp_path: Path, key: str
) -> None:
    """A process's reading bounds are one table (schema.PROC_READINGS) that the full reader
    and the templates both read: its high end is kept from the template, a little past it
    is N/A, exactly as the full reader has them."""
    attr, _, hi = schema.PROC_READINGS[key]
    for token, kept in ((f"{hi:.1f}", True), (f"{hi + 0.5:.1f}", False)):
        path = _recording(tmp_path, _swap(key, token, in_proc=True))
        fast, full, reader = read_both(path)
        assert fast == full
        snaps = TraceReader(path).read()
        assert getattr(snaps[-1].processes[0], attr) == (float(token) if kept else None)
        assert reader.templates is not None and reader.templates.hits == (2 if kept else 1)
