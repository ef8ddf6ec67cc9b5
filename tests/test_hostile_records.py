"""Typed records of the wrong shape: skipped with one line when the recording is read, never a
traceback in a consumer (issue 34: a `rendezvous` record whose `jobs` was a number crashed
every command that replayed it, and stopped the dashboard at "sampling failed").

The class is closed by checking every record type against its shape once, when it is read
(gputui.collect.trace.record_schema). The property test takes the real recordings of tests/data
(and the record types no recording carries yet, made by their writers' code: see
tests/recorded_records.py), gives any field of any record a hostile value (a wrong type,
null, huge, nested, escapes) or removes it, and runs `check --replay`, `snapshot --replay`
and the Watcher's fold over the result: none may raise.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hostile_harness import json_problem, run_main
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from recorded_records import DELETE, HOSTILE_VALUES, mutate, paths, recordings, records

from gputui.collect.trace import record_schema
from gputui.collect.trace.read import TraceReader
from gputui.errors import GputuiError
from gputui.watch.watcher import Watcher

pytestmark = pytest.mark.hostile

ROOT = Path(__file__).resolve().parent.parent
ISSUE_RECORDING = (
    '{"t":1795338000,"gpu":0}\n'
    '{"type":"rendezvous","t":1795338000.5,"jobs":5}\n'
    '{"t":1795338001,"gpu":0}\n'
)


def _gputui(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_issues_rendezvous_record_of_the_wrong_shape_gives_a_clean_verdict(tmp_path):
    (tmp_path / "r.jsonl").write_text(ISSUE_RECORDING)
    said = "gputui: r.jsonl:2: rendezvous record skipped (jobs: a number, expected a list)\n"
    check = _gputui("check", "--replay", "r.jsonl", cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert check.stderr == said
    assert "final: ok" in check.stdout
    snap = _gputui("snapshot", "--replay", "r.jsonl", "--json", cwd=tmp_path)
    assert snap.returncode == 0 and snap.stderr == said
    assert json.loads(snap.stdout)["verdict"]["state"] == "ok"


def test_many_skipped_records_are_named_three_times_then_counted(tmp_path):
    bad = [f'{{"type":"health","t":1795338000.{i},"events":{i}}}\n' for i in range(1, 8)]
    (tmp_path / "r.jsonl").write_text('{"t":1795338000,"gpu":0}\n' + "".join(bad))
    reader = TraceReader(tmp_path / "r.jsonl")
    reader.read()
    notes = reader.notes()
    assert reader.skipped == 7 and len(notes) == 4
    assert notes[0].endswith("r.jsonl:2: health record skipped (events: a number, expected a list)")
    assert notes[-1].endswith("r.jsonl: 7 record(s) of the wrong shape skipped in all")


async def test_the_dashboard_replays_it_and_says_what_it_skipped(tmp_path):
    from screen import run_to_end

    from gputui.collect.source import ReplaySource
    from gputui.ui.app import GputuiApp

    (tmp_path / "r.jsonl").write_text(ISSUE_RECORDING)
    app = GputuiApp(ReplaySource.from_file(tmp_path / "r.jsonl", realtime=False))
    async with app.run_test(size=(100, 30)) as pilot:
        await run_to_end(app, pilot)
        said = [n.message for n in app._notifications]
        assert app.sample_error is None
    assert any("rendezvous record skipped" in m for m in said), said
    assert not any("sampling failed" in m for m in said), said


# ---------------------------------------------------------------- every type has a shape


def _written_types() -> set[str]:
    """Every record type a writer in gputui writes: `"type": "x"` and `KIND = "x"`."""
    found: set[str] = set()
    for path in (ROOT / "gputui").rglob("*.py"):
        text = path.read_text()
        found.update(re.findall(r'"type":\s*"([a-z_]+)"', text))
        found.update(re.findall(r'^KIND = "([a-z_]+)"', text, re.M))
    return found


def test_every_record_type_a_writer_writes_has_a_shape():
    assert _written_types() - set(record_schema.KINDS) == set()


def test_every_record_of_the_real_recordings_fits_its_shape():
    all_lines = recordings()
    demo = ROOT / "gputui" / "data" / "demo-h200x2-hang.jsonl.gz"
    import gzip

    demo_records = [json.loads(ln) for ln in gzip.decompress(demo.read_bytes()).splitlines()]
    found = [rec for _n, _i, rec in records(all_lines)] + [r for r in demo_records if "type" in r]
    # Every type is here: the real recordings' own, and those tests/recorded_records.py makes
    # for the types no recording in tests/data carries yet.
    assert set(record_schema.KINDS) - {r["type"] for r in found} == set()
    for rec in found:
        assert record_schema.problem(rec["type"], rec) is None, rec["type"]


# ---------------------------------------------------------------- the property

ALL_LINES = recordings()
RECORDS = records(ALL_LINES)
PATHS = [(n, i, rec, p) for n, i, rec in RECORDS for p in paths(rec)]

_PROFILE = os.environ.get("GPUTUI_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
hostile = settings(
    deadline=None,
    database=None,
    max_examples=int(os.environ.get("GPUTUI_RECORD_EXAMPLES", "40")),
    derandomize=_PROFILE == "ci",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@st.composite
def damaged(draw) -> tuple[str, str, list[str]]:
    """(recording name, its text with 1-3 fields of one record damaged, what was done).
    Each type is drawn as often as any other (a recording holds nine `ras` records)."""
    kind = draw(st.sampled_from(sorted({r[2]["type"] for r in RECORDS})))
    name, i, rec = draw(st.sampled_from([r for r in RECORDS if r[2]["type"] == kind]))
    chosen = [p for n, j, _r, p in PATHS if n == name and j == i]
    done = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(chosen))
        value = draw(st.one_of(st.sampled_from([*HOSTILE_VALUES, DELETE]), json_values))
        try:
            rec = mutate(rec, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # the path went away with an earlier change
        done.append(f"{rec['type']}.{'.'.join(map(str, path))}")
    lines = ALL_LINES[name]
    text = "\n".join([*lines[:i], json.dumps(rec), *lines[i + 1 :]]) + "\n"
    return name, text, done


def _fold(path: Path) -> None:
    try:
        snaps = TraceReader(path).read()
    except GputuiError:
        return
    w = Watcher(2.0, 60.0, live=False)
    try:
        for s in snaps:
            w.update(s)
    finally:
        w.close()


@hostile
@given(damaged())
def test_no_damaged_field_of_any_record_makes_a_command_or_the_watcher_raise(case):
    name, text, done = case
    event(done[0].split(".")[0] if done else "nothing")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.jsonl"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        _fold(path)
        for cmd in (("check", "--json"), ("check",), ("snapshot",), ("snapshot", "--json")):
            extra = ("--stall-after", "2") if cmd[0] == "check" else ()
            r = run_main([*cmd, "--replay", str(path), *extra], bound=60)
            assert not r.hung and "Traceback" not in r.err, (done, r.err)
            if r.rc == 2:  # the one error a field's value can cause: the line nests too deep
                assert re.fullmatch(r"gputui: \S+: JSON nested deeper than \d+ levels\n", r.err)
                continue
            assert r.rc in (0, 1, 3), (done, r.rc, r.err)
            assert all(ln.startswith("gputui: ") for ln in r.err.splitlines()), (done, r.err)
            assert json_problem(cmd, r.out) is None, (done, r.out[:300])


def _every_string(v: object, value: str) -> object:
    if isinstance(v, str):
        return value
    if isinstance(v, list):
        return [_every_string(x, value) for x in v]
    if isinstance(v, dict):
        return {k: v[k] if k in ("type",) else _every_string(x, value) for k, x in v.items()}
    return v


@pytest.mark.parametrize("kind", sorted({r[2]["type"] for r in RECORDS}))
def test_a_lone_surrogate_in_every_string_of_a_record_reaches_no_output_raw(kind, tmp_path):
    """bench/hostile_sweep.py found it: a lastwords record's `core` of "\\ud800" crashed the
    text output of check and snapshot (no UTF-8 stream can print a lone surrogate)."""
    name, i, rec = next(r for r in RECORDS if r[2]["type"] == kind)
    bad = _every_string(rec, "\ud800\x1b[2J")
    lines = ALL_LINES[name]
    path = tmp_path / f"{name}.jsonl"
    text = "\n".join([*lines[:i], json.dumps(bad), *lines[i + 1 :]]) + "\n"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    for cmd in (("check",), ("snapshot",), ("check", "--json")):
        extra = ("--stall-after", "2") if cmd[0] == "check" else ()
        r = run_main([*cmd, "--replay", str(path), *extra], bound=60)
        assert r.rc in (0, 1, 3), (kind, cmd, r.rc, r.err)
        assert "\ud800" not in r.out and "Traceback" not in r.err, (kind, cmd)
