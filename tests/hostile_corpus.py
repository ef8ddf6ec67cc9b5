"""A corpus of damaged and hostile recordings, generated (never committed as blobs).

Each Case writes its file into a directory and says what a correct gputui does with it:
"error" (one line naming the file, exit 2), "ok" (accepted: exit 0 or 1) or "any". It covers
every example of issue 11 and, field by field, huge / negative / non-finite / boolean /
string numbers, wrong types, long strings and lists, nesting, truncation, gzip damage,
encodings, time order, duplicates, typed records with bad envelopes and special files.

Used by tests/test_hostile_*.py and bench/hostile_sweep.py; how a run is judged is in
tests/hostile_harness.py.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import random
import socket
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputui.collect.trace import schema

T0 = 1_795_338_072.0  # the demo's epoch: 2026-11
DT = 0.25
RAW = "__RAW_VALUE__"  # placeholder replaced by raw JSON text (NaN, 1e999, 400 digits...)
ERROR, OK, ANY = "error", "ok", "any"


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Path], str]  # writes the case into a directory; returns the FILE argument
    expect: str  # ERROR, OK or ANY


def proc(pid: int, rank: int, world: int = 2) -> dict[str, Any]:
    return {
        "pid": pid,
        "create_time": T0 - 100.0,
        "user": "alice",
        "name": "python3",
        "cmdline": ["/usr/bin/python3", "train.py", "--lr", "0.1"],
        "state": "sleeping",
        "cpu": 3.5,
        "rss_mb": 2048.0,
        "ppid": 800,
        "parent_cmd": "torchrun --nproc-per-node 2 train.py",
        "gpu_mem_mb": 3000.0,
        "env": {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
        },
    }


def gpu_line(t: float, gpu: int, state: str = "compute") -> dict[str, Any]:
    """A GPU line as `gputui record` writes it; `state` "spin" or "idle" or "compute"."""
    util, mem, power = {"spin": (100, 0, 123.0), "idle": (0, 0, 120.0)}.get(state, (98, 23, 690.0))
    pid = 815 + gpu
    return {
        "t": round(t, 3),
        "gpu": gpu,
        "phase": "train",
        "util": util,
        "mem_util": mem,
        "power_w": power,
        "power_limit_w": 700.0,
        "mem_used_mb": 3707,
        "mem_total_mb": 143771,
        "temp": 40,
        "sm_mhz": 1980,
        "mem_mhz": 2619,
        "pstate": 0,
        "events": 0,
        "pids": [pid],
        "name": "NVIDIA H200",
        "uuid": f"GPU-549afb26-e13b-c2a8-a9b1-fd78b6f5476{gpu}",
        "proc_mem": [[pid, 3000.0]],
        "procs": [proc(pid, gpu)],
    }


def base_lines(samples: int = 4, gpus: int = 2, spin: bool = False) -> list[dict[str, Any]]:
    """A small healthy recording (or, with `spin`, GPU 0 spinning while GPU 1 idles)."""
    out = []
    for i in range(samples):
        for g in range(gpus):
            state = ("spin" if g == 0 else "idle") if spin else "compute"
            out.append(gpu_line(T0 + i * DT, g, state))
    return out


def dump_line(d: Any, raw: str | None = None) -> str:
    text = json.dumps(d, separators=(",", ":"))
    if raw is not None:
        text = text.replace(json.dumps(RAW), raw)
    return text


def text_of(lines: list[Any], raw: str | None = None) -> str:
    return "".join(dump_line(d, raw) + "\n" for d in lines)


def writes(name: str, content: str | bytes | Callable[[], str | bytes], gz: bool = False):
    """A maker that writes `content` (or what it returns) to NAME, gzipped when `gz`."""

    def make(d: Path) -> str:
        data = content() if callable(content) else content
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        path = d / name
        path.write_bytes(gzip.compress(raw, mtime=0) if gz else raw)
        return str(path)

    return make


def set_path(d: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value


def mutated(path: tuple[Any, ...], value: Any, raw: str | None = None, every: bool = True):
    """The base recording with `path` (e.g. ("procs", 0, "pid")) set to `value` in GPU 0's
    lines (every sample, or only the middle one)."""

    def content() -> str:
        lines = base_lines()
        targets = [x for x in lines if x["gpu"] == 0]
        if not every:
            targets = [targets[len(targets) // 2]]
        for x in targets:
            set_path(x, path, value)
        return text_of(lines, raw)

    return content


# Raw JSON texts for a number field: (name, text, still a number?)
NUMBERS: tuple[tuple[str, str, bool], ...] = (
    ("huge", "1e308", True),
    ("overflow", "1e999", True),
    ("neg_overflow", "-1e999", True),
    ("digits400", "9" * 400, True),
    ("neg_digits400", "-" + "9" * 400, True),
    ("digits5000", "9" * 5000, True),
    ("negative", "-1", True),
    ("u64", str(2**64), True),
    ("fraction", "1.5", True),
    ("nan", "NaN", True),
    ("infinity", "Infinity", True),
    ("bool", "true", False),
    ("string", '"5"', False),
    ("list", "[1]", False),
    ("object", '{"a":1}', False),
)

GPU_NUMBER_FIELDS = tuple(key for key, *_ in schema.GPU_READINGS)
PROC_NUMBER_FIELDS = ("create_time", "cpu", "rss_mb", "gpu_mem_mb", "ppid")
STRING_FIELDS: tuple[tuple[Any, ...], ...] = (
    ("name",),
    ("uuid",),
    ("phase",),
    ("procs", 0, "user"),
    ("procs", 0, "name"),
    ("procs", 0, "state"),
    ("procs", 0, "parent_cmd"),
    ("procs", 0, "env_error"),
)
# (name, value, accepted?)
STRINGS: tuple[tuple[str, Any, bool], ...] = (
    ("int", 5, False),
    ("bool", True, False),
    ("list", ["x"], False),
    ("object", {"x": "y"}, False),
    ("too_long", "x" * (schema.MAX_STR_CHARS + schema.MAX_CMDLINE_CHARS + 1), False),
    ("escapes", "\x1b]0;owned\x07\x1b[2J\x1b[31mred", True),
    ("surrogate", "\ud800bad", True),
    ("empty", "", True),
    ("rtl_override", "abc\u202edef", True),
    ("newlines", "one\ntwo\r\nthree", True),
)


def _field_cases() -> Iterator[Case]:
    for key in GPU_NUMBER_FIELDS:
        for vname, raw, numeric in NUMBERS:
            yield Case(
                f"gpu.{key}={vname}",
                writes(f"{key}-{vname}.jsonl", mutated((key,), RAW, raw)),
                OK if numeric else ERROR,
            )
    for key in ("t", "gpu"):
        for vname, raw, _ in NUMBERS:
            yield Case(
                f"{key}={vname}", writes(f"{key}-{vname}.jsonl", mutated((key,), RAW, raw)), ERROR
            )
        yield Case(
            f"{key}=missing",
            writes(f"{key}-missing.jsonl", f'{{"{"gpu" if key == "t" else "t"}": 0}}\n'),
            ERROR,
        )
    for vname, raw, _ in NUMBERS:
        # Identifiers: a pid that is not a pid is structural damage, whatever its type.
        yield Case(
            f"pids[]={vname}", writes(f"pids-{vname}.jsonl", mutated(("pids", 0), RAW, raw)), ERROR
        )
        yield Case(
            f"procs[].pid={vname}",
            writes(f"ppid-{vname}.jsonl", mutated(("procs", 0, "pid"), RAW, raw)),
            ERROR,
        )
        yield Case(
            f"proc_mem pid={vname}",
            writes(f"pmp-{vname}.jsonl", mutated(("proc_mem", 0, 0), RAW, raw)),
            ERROR,
        )
        yield Case(
            f"proc_mem MiB={vname}",
            writes(f"pmm-{vname}.jsonl", mutated(("proc_mem", 0, 1), RAW, raw)),
            OK if numeric_of(vname) else ERROR,
        )
        for key in PROC_NUMBER_FIELDS:
            yield Case(
                f"procs[].{key}={vname}",
                writes(f"proc-{key}-{vname}.jsonl", mutated(("procs", 0, key), RAW, raw)),
                OK if numeric_of(vname) else ERROR,
            )
    for path in STRING_FIELDS:
        for vname, value, accepted in STRINGS:
            label = ".".join(str(p) for p in path)
            yield Case(
                f"{label}={vname}",
                writes(f"{label}-{vname}.jsonl", mutated(path, value)),
                OK if accepted else ERROR,
            )
    for vname, raw, _ in NUMBERS:
        yield Case(
            f"pids={vname}",
            writes(f"pidsl-{vname}.jsonl", mutated(("pids",), RAW, raw)),
            OK if vname == "list" else ERROR,  # "[1]" is a list of one pid
        )
    lists = {
        "pids": [
            ("string", "x"),
            ("object", {}),
            ("too_many", list(range(1, schema.MAX_PROCS_PER_GPU + 2))),
        ],
        "proc_mem": [
            ("string", "x"),
            ("bad_pair", [[815]]),
            ("triple", [[815, 1, 2]]),
            ("flat", [815, 1]),
        ],
        "procs": [
            ("string", "x"),
            ("of_ints", [5]),
            ("of_lists", [[815]]),
            ("object", {"pid": 815}),
        ],
    }
    for key, variants in lists.items():
        for vname, value in variants:
            yield Case(
                f"{key}=list:{vname}",
                writes(f"l-{key}-{vname}.jsonl", mutated((key,), value)),
                ERROR,
            )
    cmd = ("procs", 0, "cmdline")
    for vname, value, expect in (
        ("string", "python train.py", ERROR),
        ("ints", [1, 2], ERROR),
        ("too_many_args", ["a"] * (schema.MAX_CMDLINE_ARGS + 1), ERROR),
        ("too_long", ["x" * (schema.MAX_CMDLINE_CHARS + 1)], ERROR),
        ("at_the_bound", ["a"] * schema.MAX_CMDLINE_ARGS, OK),
        ("escapes", ["\x1b[2J", "\x00", "\ud800"], OK),
        ("null", None, OK),
    ):
        yield Case(f"cmdline={vname}", writes(f"cmd-{vname}.jsonl", mutated(cmd, value)), expect)
    env = ("procs", 0, "env")
    big = "1000000000000"
    for vname, value, expect in (
        ("string", "x", ERROR),  # issue 11: AttributeError
        ("int", 5, ERROR),
        ("list", ["RANK=0"], ERROR),
        ("int_value", {"RANK": 5}, ERROR),
        ("null_value", {"RANK": None}, ERROR),
        ("too_many", {f"V{i}": "x" for i in range(schema.MAX_ENV_ENTRIES + 1)}, ERROR),
        ("long_value", {"RANK": "1" * (schema.MAX_STR_CHARS + 1)}, ERROR),
        ("huge_rank", {"RANK": big, "WORLD_SIZE": big, "MASTER_ADDR": "h", "MASTER_PORT": "1"}, OK),
        ("huge_local_world", {**proc(815, 0)["env"], "LOCAL_WORLD_SIZE": big}, OK),
        ("arabic_digits", {**proc(815, 0)["env"], "RANK": "\u0661"}, OK),
        ("underscore_digits", {**proc(815, 0)["env"], "LOCAL_WORLD_SIZE": "1_0"}, OK),
        ("other_keys", {"SECRET_TOKEN": "hunter2", "PATH": "/bin"}, OK),
        ("null", None, OK),
    ):
        yield Case(f"env={vname}", writes(f"env-{vname}.jsonl", mutated(env, value)), expect)


def numeric_of(vname: str) -> bool:
    return next(n for name, _, n in NUMBERS if name == vname)


def _structure_cases() -> Iterator[Case]:
    good = text_of(base_lines())
    rng = random.Random(11)
    yield Case("empty_file", writes("empty.jsonl", ""), ERROR)
    yield Case("only_blank_lines", writes("blank.jsonl", "\n \n\t\n\r\n"), ERROR)
    yield Case("not_json", writes("notjson.jsonl", "not json\n"), ERROR)
    yield Case("json_list", writes("list.jsonl", "[1, 2]\n"), ERROR)
    yield Case("json_string", writes("str.jsonl", '"hello"\n'), ERROR)
    yield Case("json_null", writes("null.jsonl", "null\n"), ERROR)
    yield Case("json_number", writes("num.jsonl", "5\n"), ERROR)
    yield Case("bad_line_in_middle", writes("mid.jsonl", good + "{oops\n" + good), ERROR)
    yield Case("binary_junk", writes("junk.jsonl", rng.randbytes(4096)), ERROR)
    yield Case("binary_junk_gz_name", writes("junk.jsonl.gz", b"\x00\x01not gzip at all"), ERROR)
    yield Case("nul_bytes", writes("nul.jsonl", b"\x00" * 1000 + b"\n"), ERROR)
    yield Case(
        "latin1_bytes",
        writes("latin1.jsonl", good.encode() + b'{"t":1,"gpu":0,"name":"\xe9"}\n'),
        ERROR,
    )
    yield Case("utf8_bom", writes("bom.jsonl", b"\xef\xbb\xbf" + good.encode()), OK)
    yield Case("utf16", writes("utf16.jsonl", good.encode("utf-16")), ERROR)
    yield Case("crlf", writes("crlf.jsonl", good.replace("\n", "\r\n")), OK)
    yield Case("empty_lines_between", writes("gaps.jsonl", good.replace("\n", "\n\n  \n")), OK)
    yield Case("no_final_newline", writes("nofinal.jsonl", good.rstrip("\n")), OK)
    yield Case("truncated_last_line", writes("trunc.jsonl", good + good.splitlines()[0][:37]), OK)
    yield Case("truncated_only_line", writes("trunc1.jsonl", good.splitlines()[0][:37]), ERROR)
    gz = gzip.compress(good.encode(), mtime=0)
    yield Case("gzip", writes("ok.jsonl.gz", good, gz=True), OK)
    yield Case("gzip_without_gz_name", writes("gzdata.jsonl", gz), OK)
    yield Case("gzip_truncated", writes("cut.jsonl.gz", gz[: len(gz) * 2 // 3]), ANY)
    yield Case("gzip_header_only", writes("hdr.jsonl.gz", gz[:10]), ERROR)
    bad = bytearray(gz)
    for i in range(len(bad) // 3, len(bad) // 3 + 16):
        bad[i] ^= 0x5A
    yield Case("gzip_corrupted", writes("bad.jsonl.gz", bytes(bad)), ERROR)
    yield Case(
        "gzip_two_members",
        writes("two.jsonl.gz", gz + gzip.compress(text_of(base_lines()[:0]).encode())),
        OK,
    )
    yield Case("gzip_trailing_junk", writes("tail.jsonl.gz", gz + b"junk after the stream"), ERROR)
    yield Case("plain_text_gz_name", writes("plain.jsonl.gz", good), ERROR)
    # Bombs: small on disk, huge decompressed.
    zeros = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = zeros.compress(b"\0" * (schema.MAX_LINE_BYTES * 2)) + zeros.flush()
    yield Case("gzip_bomb_zeros", writes("bomb0.jsonl.gz", bomb), ERROR)
    nl = zlib.compressobj(9, zlib.DEFLATED, 31)
    nl_bomb = nl.compress(b"\n" * (schema.MAX_BLANK_LINES + 10)) + nl.flush()
    yield Case("gzip_bomb_newlines", writes("bombnl.jsonl.gz", nl_bomb), ERROR)
    deep = 5000
    yield Case(
        "nesting_5000",
        writes("deep.jsonl", '{"t":1,"gpu":0,"x":' + "[" * deep + "]" * deep + "}\n"),
        ERROR,
    )
    yield Case(
        "nesting_5000_objects",
        writes("deepo.jsonl", '{"t":1,"gpu":0,"x":' + '{"a":' * deep + "1" + "}" * deep + "}\n"),
        ERROR,
    )
    inner = schema.MAX_DEPTH - 1
    ok_deep = base_lines()
    ok_deep[0]["x"] = RAW
    yield Case(
        "nesting_at_the_bound",
        writes("deep8.jsonl", text_of(ok_deep, "[" * inner + "]" * inner)),
        OK,
    )
    yield Case(
        "nesting_one_past",
        writes("deep9.jsonl", text_of(ok_deep, "[" * (inner + 1) + "]" * (inner + 1))),
        ERROR,
    )
    yield Case(
        "brackets_in_strings", writes("brs.jsonl", text_of(ok_deep, json.dumps("[" * 5000))), OK
    )
    long_line = '{"t":1,"gpu":0,"x":"' + "a" * (schema.MAX_LINE_BYTES + 10) + '"}\n'
    yield Case("long_line", writes("long.jsonl", long_line), ERROR)
    yield Case("long_line_no_newline", writes("longnn.jsonl", long_line.rstrip("\n")), ERROR)
    near = base_lines()
    near[0]["x"] = "a" * (schema.MAX_LINE_BYTES - 8192)
    yield Case("line_near_the_bound", writes("near.jsonl", text_of(near)), OK)


def _size_cases() -> Iterator[Case]:
    # issue 11: 100k GPU rows in one sample made the reader quadratic.
    yield Case(
        "100k_gpu_rows_one_time",
        writes(
            "gpus100k.jsonl",
            lambda: "".join(f'{{"t":1,"gpu":{i % 256}}}\n' for i in range(100_000)),
        ),
        ERROR,
    )
    yield Case("gpu_index_256", writes("gpu256.jsonl", '{"t":1,"gpu":256}\n'), ERROR)
    many = [gpu_line(T0 + i * DT, g) for i in range(3) for g in range(schema.MAX_GPUS_PER_SAMPLE)]
    yield Case("64_gpus", writes("gpus64.jsonl", text_of(many)), OK)
    more = [gpu_line(T0, g) for g in range(schema.MAX_GPUS_PER_SAMPLE + 1)]
    yield Case("65_gpus", writes("gpus65.jsonl", text_of(more)), ERROR)
    # issue 11: a line of 2M pids took the TUI past 8 GB.
    yield Case(
        "2M_pids",
        writes(
            "pids2m.jsonl",
            lambda: (
                '{"t":1,"gpu":0,"pids":['
                + ",".join(str(1 + i % 4_000_000) for i in range(2_000_000))
                + "]}\n"
            ),
        ),
        ERROR,
    )
    full = base_lines()
    for x in full:
        x["pids"] = list(range(1000, 1000 + schema.MAX_PROCS_PER_GPU))
    yield Case("256_pids_per_gpu", writes("pids256.jsonl", text_of(full)), OK)
    crowd = []
    for g in range(schema.MAX_GPUS_PER_SAMPLE):
        x = gpu_line(T0, g)
        x["pids"] = [10_000 + g * 100 + k for k in range(65)]
        crowd.append(x)
    yield Case("4160_procs_one_sample", writes("crowd.jsonl", text_of(crowd)), ERROR)
    procs = base_lines()
    for x in procs:
        x["procs"] = [proc(2000 + k, k, 256) for k in range(schema.MAX_PROCS_PER_GPU)]
    yield Case("256_procs_per_line", writes("procs256.jsonl", text_of(procs)), OK)


def _time_cases() -> Iterator[Case]:
    lines = base_lines()
    good = text_of(lines)
    hang = text_of(base_lines(samples=60, spin=True))
    yield Case("hang", writes("hang.jsonl", hang), OK)
    yield Case(
        "every_line_twice",
        writes("twice.jsonl", "".join(ln + "\n" + ln + "\n" for ln in hang.splitlines())),
        OK,
    )
    pairs = hang.splitlines()
    blocks = "".join(
        a + "\n" + b + "\n" + a + "\n" + b + "\n"
        for a, b in zip(pairs[::2], pairs[1::2], strict=True)
    )
    yield Case("every_sample_twice", writes("twice2.jsonl", blocks), OK)
    yield Case("whole_file_twice", writes("cat2.jsonl", good + good), ERROR)
    back = list(lines)
    back[2], back[6] = back[6], back[2]
    yield Case("time_backwards", writes("back.jsonl", text_of(back)), ERROR)
    yield Case("reversed_file", writes("rev.jsonl", text_of(lines[::-1])), ERROR)
    conflict = copy.deepcopy(lines[:3])
    conflict[2] = copy.deepcopy(lines[0])
    conflict[2]["util"] = 1
    yield Case("same_t_gpu_different_reading", writes("conflict.jsonl", text_of(conflict)), ERROR)
    same = [dict(x, t=T0, util=i) for i, x in enumerate(lines)]
    yield Case("every_sample_same_t", writes("samet.jsonl", text_of(same)), ERROR)
    jitter = copy.deepcopy(lines)
    for x in jitter:
        if x["gpu"] == 1:
            x["t"] = round(x["t"] + 0.1, 3)
    yield Case("jitter_within_a_sample", writes("jitter.jsonl", text_of(jitter)), OK)
    yield Case("t_zero", writes("t0.jsonl", '{"t":0,"gpu":0}\n{"t":1,"gpu":0}\n'), OK)
    yield Case("t_1e20", writes("t1e20.jsonl", '{"t":1e20,"gpu":0}\n'), ERROR)  # crashed the TUI
    yield Case("t_year_2101", writes("t2101.jsonl", '{"t":4133980800,"gpu":0}\n'), ERROR)
    yield Case(
        "one_gpu_10hz",
        writes(
            "10hz.jsonl",
            "".join(f'{{"t":{100 + i / 10:.1f},"gpu":0,"util":5}}\n' for i in range(50)),
        ),
        OK,
    )
    gap = text_of([gpu_line(T0, 0), gpu_line(T0 + 30 * 86400, 0)])
    yield Case("a_month_between_samples", writes("gap.jsonl", gap), OK)
    yield Case("kitchen_sink", writes("sink.jsonl", kitchen_sink), OK)
    every = base_lines()
    for x in every:  # issue 11: check never ended, the TUI spun at 100% CPU
        x["procs"][0]["env"]["LOCAL_WORLD_SIZE"] = "1000000000000"
    yield Case("huge_local_world_every_rank", writes("lws.jsonl", text_of(every)), OK)


def _record_cases() -> Iterator[Case]:
    good = text_of(base_lines())
    meta = {"type": "meta", "t": T0 - 1, "host": "node-7", "gputui": "0.1.0", "interval": 0.25}
    stacks = {
        "type": "stacks",
        "t": T0 + 1,
        "ranks": [{"pid": 815, "frames": [{"name": "f", "file": "a.py", "line": 3}]}],
    }
    yield Case("meta_first", writes("meta.jsonl", dump_line(meta) + "\n" + good), OK)
    yield Case(
        "meta_twice_identical", writes("meta2.jsonl", (dump_line(meta) + "\n") * 2 + good), OK
    )
    yield Case("meta_after_samples", writes("metalate.jsonl", good + dump_line(meta) + "\n"), ERROR)
    yield Case(
        "meta_two_different",
        writes(
            "metadiff.jsonl",
            dump_line(meta) + "\n" + dump_line(dict(meta, host="other")) + "\n" + good,
        ),
        ERROR,
    )
    # A meta record of the wrong shape is skipped with one line
    # (gputui.collect.trace.record_schema).
    for vname, value, expect in (
        ("host_int", {"host": 5}, OK),
        ("host_long", {"host": "h" * 300}, OK),
        ("host_escapes", {"host": "\x1b[2Jnode"}, OK),
        ("interval_nan", {"interval": RAW}, OK),
        ("interval_str", {"interval": "1"}, OK),
    ):
        yield Case(
            f"meta.{vname}",
            writes(f"meta-{vname}.jsonl", dump_line(dict(meta, **value), "NaN") + "\n" + good),
            expect,
        )
    yield Case("stacks_record", writes("stacks.jsonl", good + dump_line(stacks) + "\n"), OK)
    yield Case(
        "stacks_record_twice", writes("stacks2.jsonl", good + (dump_line(stacks) + "\n") * 2), OK
    )
    yield Case(
        "record_before_samples",
        writes("recfirst.jsonl", dump_line(dict(stacks, t=T0 - 50)) + "\n" + good),
        OK,
    )
    half = good.splitlines(keepends=True)
    lag = "".join(half[:4]) + dump_line(dict(stacks, t=T0)) + "\n" + "".join(half[4:])
    yield Case("record_lagging", writes("reclag.jsonl", lag), OK)
    # A stall whose stacks record quotes frames and a command line full of escapes: `check`
    # explains the stall with them, and must show them escaped (issue 23).
    spin = base_lines(samples=360, spin=True)
    for x in spin:
        x["procs"][0]["cmdline"] = ["python3", "\x1b]0;owned\x07train.py", "one\ntwo"]
    nasty = "\x1b]0;owned\x07\x1b[2J"
    frames = [[f"step{nasty}", f"t{nasty}.py", 3], ["main", "t.py", 9]]
    ranks = [
        {"pid": 815, "rank": 0, "gpu": 0, "outcome": "done", "frames": frames[1:]},
        {"pid": 816, "rank": 1, "gpu": 1, "outcome": "done", "frames": frames},
    ]
    rec = dict(stacks, t=T0 + 80, job="", trigger="stalled", tool="py-spy", ranks=ranks)
    yield Case(
        "stall_with_escaped_frames",
        writes("escframes.jsonl", text_of(spin) + dump_line(rec) + "\n"),
        OK,
    )
    yield Case(
        "unknown_record_type",
        writes("ras.jsonl", good + '{"type":"ras","t":1795338073,"body":[1,2,3]}\n'),
        OK,
    )
    yield Case(
        "only_records",
        writes("onlyrec.jsonl", dump_line(meta) + "\n" + dump_line(stacks) + "\n"),
        ERROR,
    )
    for vname, raw, expect in (
        ("type_int", '{"type":5,"t":1}', ERROR),
        ("type_empty", '{"type":"","t":1}', ERROR),
        ("type_spaces", '{"type":"bad type","t":1}', ERROR),
        ("type_upper", '{"type":"STACKS","t":1}', ERROR),
        ("type_long", '{"type":"' + "a" * 40 + '","t":1}', ERROR),
        ("type_null", '{"type":null,"t":1}', ERROR),
        ("t_missing", '{"type":"stacks"}', ERROR),
        ("t_nan", '{"type":"stacks","t":NaN}', ERROR),
        ("t_string", '{"type":"stacks","t":"1"}', ERROR),
        ("t_1e20", '{"type":"stacks","t":1e20}', ERROR),
        ("t_bool", '{"type":"stacks","t":true}', ERROR),
        ("body_too_deep", '{"type":"stacks","t":1,"b":' + "[" * 20 + "]" * 20 + "}", ERROR),
        ("body_escapes", '{"type":"stacks","t":1,"b":"\\u001b[2J"}', OK),
        ("body_big", '{"type":"stacks","t":1,"b":"' + "x" * 1_000_000 + '"}', OK),
    ):
        yield Case(f"record.{vname}", writes(f"rec-{vname}.jsonl", good + raw + "\n"), expect)


def kitchen_sink() -> str:
    """Everything the reader accepts but a screen may trip on, in one file: escapes, lone
    surrogates and RTL overrides in every string, non-finite and huge readings, rank
    variables of a trillion, a command line at its bound."""
    lines = base_lines(samples=8, spin=True)
    nasty = ["\x1b]0;owned\x07\x1b[2J", "\ud800x", "a\u202eb", "one\ntwo", "", "\x00\x7f"]
    for i, x in enumerate(lines):
        s = nasty[i % len(nasty)]
        x["name"], x["uuid"], x["phase"] = s, s + "u", s + "p"
        p = x["procs"][0]
        p["user"], p["name"], p["state"], p["parent_cmd"], p["env_error"] = (s,) * 5
        p["cmdline"] = [s] + ["a" * 15] * (schema.MAX_CMDLINE_ARGS - 1)
        p["env"]["LOCAL_WORLD_SIZE"] = "1000000000000"
        p["env"]["WORLD_SIZE"] = "9" * 30
        for key in ("util", "power_w", "temp", "pstate", "events", "sm_mhz") if i % 3 else ():
            x[key] = RAW
        p["create_time"], p["cpu"], p["rss_mb"] = RAW, RAW, RAW
    return text_of(lines, "1e999")


def _special_cases() -> Iterator[Case]:
    def fifo(d: Path) -> str:
        p = d / "fifo"
        os.mkfifo(p)
        return str(p)

    def sock(d: Path) -> str:
        p = d / "s"  # AF_UNIX paths are short: keep it near the directory
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()  # the socket file stays
        return str(p)

    def link_to_fifo(d: Path) -> str:
        os.mkfifo(d / "fifo2")
        os.symlink(d / "fifo2", d / "to-fifo")
        return str(d / "to-fifo")

    def dangling(d: Path) -> str:
        os.symlink(d / "absent", d / "dangling")
        return str(d / "dangling")

    def link_to_good(d: Path) -> str:
        (d / "real.jsonl").write_text(text_of(base_lines()))
        os.symlink(d / "real.jsonl", d / "link.jsonl")
        return str(d / "link.jsonl")

    def directory(d: Path) -> str:
        (d / "adir").mkdir()
        return str(d / "adir")

    yield Case("fifo", fifo, ERROR)  # issue 11: blocked for ever
    yield Case("socket", sock, ERROR)
    yield Case("symlink_to_fifo", link_to_fifo, ERROR)
    yield Case("dangling_symlink", dangling, ERROR)
    yield Case("symlink_to_recording", link_to_good, OK)
    yield Case("directory", directory, ERROR)
    yield Case("dev_zero", lambda d: "/dev/zero", ERROR)  # issue 11: MemoryError
    yield Case("dev_null", lambda d: "/dev/null", ERROR)
    yield Case("dev_urandom", lambda d: "/dev/urandom", ERROR)
    yield Case("missing_file", lambda d: str(d / "absent.jsonl"), ERROR)
    yield Case("empty_name", lambda d: "", ERROR)  # issue 11: ran live
    yield Case("name_with_newline", writes("a\nb.jsonl", "not json\n"), ERROR)


def corpus() -> list[Case]:
    """Every case, in a stable order with unique names."""
    cases = [
        *_field_cases(),
        *_structure_cases(),
        *_size_cases(),
        *_time_cases(),
        *_record_cases(),
        *_special_cases(),
    ]
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "case names must be unique"
    return cases


def materialize(cases: list[Case], root: Path) -> list[tuple[Case, str]]:
    """Write every case into its own directory under `root`: (case, FILE argument)."""
    out = []
    for i, c in enumerate(cases):
        d = root / f"c{i:03d}"
        d.mkdir(parents=True, exist_ok=True)
        out.append((c, c.make(d)))
    return out
