"""Property tests (Hypothesis): generated hostile recordings against the reader, the
detector and the JSON of `snapshot` and `check`.

Files are built from valid recorder lines with a few fields replaced by anything JSON can
hold (and some NaN, Infinity and 400-digit numbers it cannot), typed records with random
envelopes, raw bytes, duplicated and reordered lines, gzip, BOM and CRLF. The properties:

- the reader returns snapshots or raises GputuiError, whose text is one line naming the
  file; nothing else escapes;
- the detector takes any snapshots the reader accepts, in bounded time;
- `snapshot --json` and `check --json` print only strict JSON, and no command prints a
  traceback.

Profiles: `dev` (random, the default) and `ci` (derandomized, reproducible), chosen with
GPUTUI_HYPOTHESIS_PROFILE (or `ci` when CI is set). Neither writes a .hypothesis database.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hostile_corpus import base_lines
from hostile_harness import json_problem, run_main
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gputui.collect.trace.format import read_trace
from gputui.diagnose.hang.detector import Detector
from gputui.errors import GputuiError

pytestmark = pytest.mark.hostile

_COMMON = {
    "deadline": None,
    "database": None,
    "max_examples": 60,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("dev", **_COMMON)
settings.register_profile("ci", derandomize=True, **_COMMON)
PROFILE = os.environ.get("GPUTUI_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
hostile = settings(settings.get_profile(PROFILE))

DETECTOR_BOUND_S = 10.0  # a hang guard, not a speed target: these files are a few KiB

# ---------------------------------------------------------------- strategies

# JSON texts Python's json.dumps never writes, but a file can hold.
RAW_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "9" * 400, "-" + "9" * 30]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, 50, 100, 101, 700.0, 4194304, 4194305, -1, 2**64, 1.5]),
    st.text(max_size=12),
    st.sampled_from(["\x1b[2J", "\ud800", "1000000000000", "\u0661", "", "x" * 5000]),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)

GPU_KEYS = [
    "t", "gpu", "phase", "util", "mem_util", "power_w", "power_limit_w", "mem_used_mb",
    "mem_total_mb", "temp", "sm_mhz", "mem_mhz", "pstate", "events", "pids", "name", "uuid",
    "proc_mem", "procs", "extra",
]  # fmt: skip
PROC_KEYS = [
    "pid", "create_time", "user", "name", "cmdline", "state", "cpu", "rss_mb", "ppid",
    "parent_cmd", "gpu_mem_mb", "env", "env_error",
]  # fmt: skip
ENV_KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "OTHER"]


NUMERIC = {
    "t", "util", "mem_util", "power_w", "power_limit_w", "mem_used_mb", "mem_total_mb", "temp",
    "sm_mhz", "mem_mhz", "pstate", "events", "procs.create_time", "procs.cpu", "procs.rss_mb",
    "procs.ppid", "procs.gpu_mem_mb",
}  # fmt: skip
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN and infinities too: json.dumps writes them as NaN / Infinity
    st.sampled_from([0, 1, 50, 99.9, 100, 101, 700.0, 1e308, 2**64 - 1, 2**64, 7.5]),
    st.sampled_from(RAW_NUMBERS).map(lambda r: f"RAW:{r}"),
)
strings = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["\x1b[2J", "\ud800", "1000000000000", "\u0661", "", "x" * 5000, " 3"]),
    st.integers(0, 2**40).map(str),
)


@st.composite
def mutation(draw) -> tuple[str, Any]:
    """(where, value): a field of a GPU line, of its process or of its env, and what goes
    there: mostly a value of the field's own type (in range or not), sometimes anything.
    A value "RAW:<text>" is written as that raw JSON text (NaN, 1e999, 400 digits)."""
    where = draw(
        st.one_of(
            st.sampled_from(GPU_KEYS),
            st.sampled_from(PROC_KEYS).map(lambda k: f"procs.{k}"),
            st.sampled_from(ENV_KEYS).map(lambda k: f"env.{k}"),
        )
    )
    if draw(st.integers(0, 3)) == 3:
        value = draw(st.one_of(json_values, st.sampled_from(RAW_NUMBERS).map(lambda r: f"RAW:{r}")))
    elif where in NUMERIC:
        value = draw(numbers)
    else:
        value = draw(strings)
    return where, value


def _apply(line: dict[str, Any], where: str, value: Any, raws: dict[str, str]) -> None:
    if isinstance(value, str) and value.startswith("RAW:"):
        token = f"__raw{len(raws)}__"
        raws[token] = value[4:]
        value = token
    procs = line.get("procs")
    first = procs[0] if isinstance(procs, list) and procs else None
    if where.startswith(("procs.", "env.")) and not isinstance(first, dict):
        return  # an earlier mutation of this line already replaced its process list
    if where.startswith("procs."):
        first[where[6:]] = value
    elif where.startswith("env."):
        env = first.get("env")
        if isinstance(env, dict):
            env[where[4:]] = value
    else:
        line[where] = value


@st.composite
def hostile_file(draw) -> tuple[bytes, str]:
    """(bytes, name) of a damaged recording."""
    spin = draw(st.booleans())
    lines: list[Any] = base_lines(samples=draw(st.integers(1, 6)), spin=spin)
    raws: dict[str, str] = {}
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        where, value = draw(mutation())
        _apply(lines[i], where, value, raws)
    texts = []
    for d in lines:
        t = json.dumps(d, separators=(",", ":"))
        for token, raw in raws.items():
            t = t.replace(json.dumps(token), raw)
        texts.append(t)
    # Damage to the file as a whole.
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["dup", "swap", "drop", "record", "junk", "blank"]))
        i = draw(st.integers(0, len(texts) - 1))
        if kind == "dup":
            texts.insert(i, texts[i])
        elif kind == "swap":
            j = draw(st.integers(0, len(texts) - 1))
            texts[i], texts[j] = texts[j], texts[i]
        elif kind == "drop" and len(texts) > 1:
            del texts[i]
        elif kind == "record":
            env = {"type": draw(st.one_of(st.sampled_from(["meta", "stacks", "ras"]), json_values))}
            env["t"] = draw(st.one_of(st.just(1_795_338_072.5), json_values))
            env["body"] = draw(json_values)
            texts.insert(i, json.dumps(env))
        elif kind == "junk":
            texts.insert(i, draw(st.binary(max_size=40)).decode("latin-1"))
        else:
            texts.insert(i, "")
    data = "\n".join(texts).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data += b"\n"
    # Rarer damage is drawn as the top of a range: Hypothesis leans to small numbers.
    if draw(st.integers(0, 9)) == 9:
        data = data[: draw(st.integers(0, len(data)))]  # cut short
    if draw(st.integers(0, 9)) == 9:
        data = data.replace(b"\n", b"\r\n")
    if draw(st.integers(0, 9)) == 9:
        data = b"\xef\xbb\xbf" + data
    if draw(st.integers(0, 4)) == 4:
        return gzip.compress(data, mtime=0), "rec.jsonl.gz"
    return data, "rec.jsonl"


def _write(tmp: str, data: bytes, name: str) -> Path:
    path = Path(tmp) / name
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------- properties


@hostile
@given(hostile_file())
def test_the_reader_returns_snapshots_or_one_line_naming_the_file(file):
    data, name = file
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(tmp, data, name)
        try:
            snaps = read_trace(path)
        except GputuiError as e:
            text = str(e)
            assert "\n" not in text and str(path) in text
            event(f"refused: {text.split(': ', 2)[-1][:30]}")
            return
        event("accepted")
        assert snaps and all(a.t < b.t for a, b in zip(snaps, snaps[1:], strict=False))


@hostile
@given(hostile_file())
def test_the_detector_takes_anything_the_reader_accepts_in_bounded_time(file):
    data, name = file
    with tempfile.TemporaryDirectory() as tmp:
        try:
            snaps = read_trace(_write(tmp, data, name))
        except GputuiError:
            return
    det = Detector(stall_after=0.5, hang_after=1.0)  # short windows: reach the judging code
    start = time.monotonic()
    for s in snaps:
        v = det.update(s)
        assert v.state in ("ok", "stalled", "hung")
    assert time.monotonic() - start < DETECTOR_BOUND_S


@settings(settings.get_profile(PROFILE), max_examples=30)  # four commands per example
@given(hostile_file())
def test_snapshot_and_check_print_only_strict_json_and_no_traceback(file):
    data, name = file
    with tempfile.TemporaryDirectory() as tmp:
        path = str(_write(tmp, data, name))
        for cmd in (("snapshot", "--json"), ("check", "--json"), ("snapshot",), ("check",)):
            extra = ("--stall-after", "0.5", "--hang-after", "1") if cmd[0] == "check" else ()
            r = run_main([*cmd, "--replay", path, *extra], bound=30)
            assert not r.hung and "Traceback" not in r.err, r.err
            assert r.rc in (0, 1, 2)
            if r.rc == 2:
                assert r.err.count("\n") == 1 and r.err.startswith("gputui: ")
            assert json_problem(cmd, r.out) is None, r.out[:500]
