"""What one line of a recording may hold: the bounds, and the rule for a bad value.

A recording is untrusted input: it may come from another machine, another version, a
truncated copy or someone probing the tool. Everything a line can make gputui do (allocate,
loop, format, compare) is bounded here, by a named constant whose docstring says why that
number. The reader (trace_read) applies them while it streams, so a hostile file costs at
most these bounds, never a hang or a traceback.

The rule for a bad value:

- **Structural damage is an error** (one line naming the file and the line, exit 2): not
  JSON, not an object, nesting deeper than MAX_DEPTH, a missing or invalid `t` or `gpu`, a
  bound exceeded, a field of the wrong JSON type (`"name": 5`, a bool where a number
  belongs, a list of something other than pids), a pid outside 1..PID_MAX_LIMIT. Such a
  file was not written by gputui or the calibration recorder, or it was damaged; guessing
  what it meant could show the wrong GPU as the culprit.
- **An out-of-range reading becomes N/A**: a number of the right type that cannot be true
  for its field (util 250, power 1e999, a 400-digit integer, NaN, a pstate of 7.5) is
  dropped to None, and the reason is kept in `GpuSample.na` under the field's name, so the
  dashboard shows N/A honestly instead of a made-up value. Process readings (cpu, rss...)
  become None the same way (ProcessInfo has no `na`).
- **Strings are made printable**: a control character, a lone surrogate or any other
  non-printable character in a recorded string is replaced by U+FFFD, so a recording cannot
  send escape sequences to the terminal or break a UTF-8 encoder.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from gputui.collect.model import GpuSample, ProcessInfo
from gputui.collect.procs.jobs import RANK_ENV_VARS, rank_from_env
from gputui.collect.procs.owner import owner_from_json
from gputui.errors import GputuiError
from gputui.redact.recorded import recorded_argv, recorded_text

# ---------------------------------------------------------------- bounds

MAX_LINE_BYTES = 8 << 20
"""One line is one GPU of one sample. Its largest honest content is MAX_PROCS_PER_GPU
processes with a full command line each (256 x 16 KiB = 4 MiB) plus their readings; twice
that leaves room for escaping. A line of 2 million pids (16 MB) is refused after reading
8 MiB, not 8 GB."""

MAX_DEPTH = 16
"""JSON nesting: a GPU line is an object (1) holding `procs` (2) of objects (3) holding `env`
or `cmdline` (4); typed records (stack dumps: ranks, threads, frames) nest deeper. 16 leaves
room for those and stays far below the depth at which Python's parser raises RecursionError
(about 1,000)."""

MAX_PROCS_PER_GPU = 256
"""Pids, `procs` entries and `proc_mem` pairs per GPU line. MPS allows 48-60 clients per GPU
and MIG 7 instances; 256 is several times any real count."""

MAX_CMDLINE_ARGS = 1024
"""Arguments per recorded command line (the writer keeps at most this many)."""

MAX_CMDLINE_CHARS = 16 * 1024
"""Total characters of one recorded command line (the writer shortens longer ones): enough
for a long torchrun invocation, small enough that MAX_PROCS_PER_GPU of them fit a line."""

MAX_ENV_ENTRIES = 64
"""Entries of a process's recorded `env`: gputui writes only the 8 rank variables."""

MAX_STR_CHARS = 4096
"""Any other string (name, uuid, user, state, env values, phase...): hostnames are at most
253 characters and GPU names about 96; 4096 is generous and bounds what a pane renders."""

MAX_GPU_INDEX = 255
"""NVML indices count up from 0; no node has 256 GPUs (an NVL72 rack is 18 nodes of 4)."""

MAX_GPUS_PER_SAMPLE = 64
"""GPU lines in one sample: today's largest nodes have 8-16 GPUs. This also bounds the work
per sample of the sample grouping and the detector."""

MAX_PROCS_PER_SAMPLE = 4096
"""Distinct processes in one sample, all GPUs together (MAX_GPUS_PER_SAMPLE x 64)."""

MAX_SAMPLES = 100_000
"""Samples per file: 28 hours at 1 Hz, 7 hours at 4 Hz. A replay holds every sample in
memory, so this (with MAX_LINES) bounds the reader's memory."""

MAX_RECORDS = 100_000
"""Typed records (stack dumps and the like) per file: one a second for 28 hours."""

MAX_LINES = 1_000_000
"""Non-blank lines per file: a day of an 8-GPU node at 1 Hz is 691,200. Each GPU line costs
about 0.5-2 KiB once read (more with many processes) and tens of microseconds to check, so
this bounds a hostile file of valid-looking lines to about 2 GB and a minute, at worst."""

MAX_BLANK_LINES = 100_000
"""Blank lines per file: gputui writes none; a few are harmless. A file of nothing but
newlines (a gzip bomb of them) ends here within a fraction of a second."""

MAX_TOTAL_BYTES = 1 << 30
"""Decompressed bytes per file: a gzip bomb or /dev/zero stops here. 1 GiB is about a day
of an 8-GPU node at 1 Hz with its processes; record longer runs in several files."""

PID_MAX_LIMIT = 4_194_304
"""The largest pid Linux can hand out on any machine (PID_MAX_LIMIT on 64-bit kernels): a
recording may come from another node, so the local pid_max does not apply."""

T_MAX = 4_102_444_800.0
"""Latest plausible sample time, 2100-01-01 in Unix seconds. Times are formatted as dates
(`time.localtime`), which fails for years past 9999; 1e20 crashed the dashboard."""

MIB_MAX = float(1 << 30)
"""Largest plausible memory size in MiB (1 PiB), for GPU memory and a process's RSS."""

RECORD_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}")
"""A typed record's `type`: a short lower-case word (`meta`, `stacks`, `ras`...)."""

# Ranges of GPU readings: a value outside becomes N/A. (file key, attribute, low, high, int)
GPU_READINGS: tuple[tuple[str, str, float, float, bool], ...] = (
    ("util", "util", 0, 100, False),
    ("mem_util", "mem_util", 0, 100, False),
    ("power_w", "power_w", 0, 10_000, False),  # a few kW at most (GB200 superchip: 2.7 kW)
    ("power_limit_w", "power_limit_w", 0, 10_000, False),
    ("mem_used_mb", "mem_used_mb", 0, MIB_MAX, False),
    ("mem_total_mb", "mem_total_mb", 0, MIB_MAX, False),
    ("temp", "temp_c", -50, 200, False),  # NVML reports degrees C; 200 is past any shutdown
    ("sm_mhz", "sm_mhz", 0, 100_000, False),
    ("mem_mhz", "mem_mhz", 0, 100_000, False),
    ("pstate", "pstate", 0, 15, True),  # P0..P15 (NVML_PSTATE_UNKNOWN, 32, is N/A)
    ("events", "events", 0, 2**64 - 1, True),  # a 64-bit bitmask
)

# Ranges of a process's readings: a value outside becomes None. file key -> (ProcessInfo
# attribute, low, high); the full reader and the templates (template.py) both read this.
PROC_READINGS: dict[str, tuple[str, float, float]] = {
    "cpu": ("cpu_percent", 0, 100 * 8192),  # 100 per CPU
    "rss_mb": ("rss_mb", 0, MIB_MAX),
    "gpu_mem_mb": ("gpu_mem_mb", 0, MIB_MAX),
}


# ---------------------------------------------------------------- parsing a line

_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_PAIR = re.compile(rb"\[\]|\{\}")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_MAX_INT_DIGITS = 24  # sign + 20 digits covers 2**64; longer integers cannot be a reading


def nesting_ok(raw: bytes, limit: int | None = None) -> bool:
    """False when brackets outside strings nest deeper than `limit`, checked without
    recursion: strip strings, keep only brackets, then peel innermost pairs `limit` times.
    Unbalanced input returns True; the JSON parser reports it."""
    limit = MAX_DEPTH if limit is None else limit
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return True  # cannot nest deeper than it has brackets: the usual line ends here
    s = _STRINGS.sub(b"", raw).translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        if not s:
            return True
        peeled = _PAIR.sub(b"", s)
        if len(peeled) == len(s):
            return True  # unbalanced: not JSON
        s = peeled
    return not s


def _parse_int(text: str) -> int | float:
    """Integers longer than any field allows become +-inf (an out-of-range value) instead of
    being converted: CPython's int() is quadratic in the digits, and float() of a 400-digit
    integer raises OverflowError."""
    if len(text) > _MAX_INT_DIGITS:
        return -math.inf if text.startswith("-") else math.inf
    return int(text)


_DECODER = json.JSONDecoder(parse_int=_parse_int)
_PLAIN = json.JSONDecoder()  # C-speed integers: for lines with no integer that long
_LONG_DIGITS = re.compile(rb"[0-9]{%d}" % (_MAX_INT_DIGITS + 1))


def parse_line(raw: bytes, where: str) -> Any:
    """One JSON value from one line's bytes (BOM and line end already removed)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GputuiError(f"{where}: not UTF-8 text (byte {e.start})") from None
    if not nesting_ok(raw):
        raise GputuiError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
    decoder = _DECODER if _LONG_DIGITS.search(raw) else _PLAIN  # no 25-digit run: no long int
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as e:
        raise GputuiError(f"{where}: not a JSON line ({e.msg} at column {e.colno})") from None
    except (ValueError, RecursionError) as e:  # belt and braces: both are bounded above
        raise GputuiError(f"{where}: not a JSON line ({type(e).__name__})") from None


# ---------------------------------------------------------------- field checks


def _kind(v: Any) -> str:
    return {
        bool: "a boolean",
        str: "a string",
        list: "a list",
        dict: "an object",
        type(None): "null",
    }.get(type(v), "a number")


def printable(s: str) -> str:
    """`s` with every non-printable character (controls, lone surrogates...) as U+FFFD."""
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else "\ufffd" for c in s)


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(v: Any) -> Any:
    """`v` (a typed record's body) with every lone surrogate in its strings as U+FFFD: a
    JSON escape such as \\ud800 decodes to one, and no UTF-8 output can print it. Other
    characters stay (a log tail keeps its line breaks; the faces escape controls)."""
    if isinstance(v, str):
        return v if v.isascii() else _SURROGATE.sub("\ufffd", v)
    if isinstance(v, list):
        return [without_surrogates(x) for x in v]
    if isinstance(v, dict):
        return {without_surrogates(k): without_surrogates(x) for k, x in v.items()}
    return v


def text(d: dict[str, Any], key: str, where: str, limit: int = MAX_STR_CHARS) -> str | None:
    """An optional string field: None, or a string of at most `limit` characters."""
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise GputuiError(f"{where}: '{key}' is {_kind(v)}, expected a string")
    if len(v) > limit:
        raise GputuiError(f"{where}: '{key}' is longer than {limit} characters")
    return printable(v)


def is_number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def number(v: Any, key: str, where: str) -> int | float | None:
    """A value that must be a JSON number or null (a bool or a string is an error)."""
    if v is None or is_number(v):
        return v
    raise GputuiError(f"{where}: '{key}' is {_kind(v)}, expected a number")


def in_range(v: int | float, lo: float, hi: float, integral: bool = False) -> str | None:
    """Why `v` cannot be a reading of a field with this range, or None when it can."""
    if isinstance(v, float) and not math.isfinite(v):
        return f"recorded value is not a finite number ({v})"
    if not lo <= v <= hi:
        shown = f"{v:.6g}" if isinstance(v, float) else str(v)
        return f"recorded value {shown} is outside {lo:g}..{hi:g}"
    if integral and isinstance(v, float) and not v.is_integer():
        return f"recorded value {v:g} is not a whole number"
    return None


def reading(
    d: dict[str, Any], key: str, where: str, lo: float, hi: float, integral: bool = False
) -> tuple[float | int | None, str | None]:
    """(value, None) for a valid reading, (None, reason) for one out of range."""
    v = d.get(key)
    kind = type(v)
    # The usual case, checked first: an int or float (exactly: a bool is neither) in range.
    # NaN fails the comparison and takes the long way.
    if (kind is int or kind is float) and lo <= v <= hi:  # type: ignore[operator]
        if not integral:
            return float(v), None  # type: ignore[arg-type]
        if kind is int:
            return v, None
    v = number(v, key, where)
    if v is None:
        return None, None
    why = in_range(v, lo, hi, integral)
    if why is not None:
        return None, why
    return (int(v) if integral else float(v)), None


def sample_time(v: Any, where: str) -> float:
    """`t`: required, a number within 0..T_MAX (a plausible Unix time)."""
    if not is_number(v):
        raise GputuiError(f"{where}: missing or non-numeric 't'")
    if in_range(v, 0, T_MAX) is not None:
        raise GputuiError(f"{where}: 't' is not a plausible Unix time (0..{T_MAX:.0f})")
    return float(v)


def gpu_index(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_GPU_INDEX:
        raise GputuiError(f"{where}: missing or invalid 'gpu' index (0..{MAX_GPU_INDEX})")
    return v


def pid(v: Any, key: str, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= PID_MAX_LIMIT:
        raise GputuiError(
            f"{where}: '{key}' holds {_kind(v)} that is not a pid (1..{PID_MAX_LIMIT})"
        )
    return v


def bounded_list(d: dict[str, Any], key: str, where: str, limit: int) -> list[Any]:
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise GputuiError(f"{where}: '{key}' is {_kind(v)}, expected a list")
    if len(v) > limit:
        raise GputuiError(f"{where}: '{key}' has {len(v)} entries, more than {limit}")
    return v


# ---------------------------------------------------------------- a GPU line


@dataclass
class GpuRow:
    """One validated GPU line: its sample time, GPU and processes, ready to be grouped."""

    t: float
    gpu: GpuSample
    phase: str | None
    procs: dict[int, ProcessInfo] = field(default_factory=dict)  # listed in `procs`
    mem: dict[int, float | None] = field(default_factory=dict)  # `proc_mem` pid -> MiB
    # The template the line was read from (gputui.collect.trace.template), None when it was
    # read in full: rows of one template differ in their readings only.
    source: Any = field(default=None, compare=False, repr=False)


def _optional_reading(
    d: dict[str, Any], key: str, where: str, lo: float, hi: float
) -> float | None:
    return reading(d, key, where, lo, hi)[0]


def _proc_reading(d: dict[str, Any], key: str, where: str) -> float | None:
    return _optional_reading(d, key, where, *PROC_READINGS[key][1:])


def _env(d: dict[str, Any], where: str) -> dict[str, str]:
    env = d.get("env")
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise GputuiError(f"{where}: 'env' is {_kind(env)}, expected an object of strings")
    if len(env) > MAX_ENV_ENTRIES:
        raise GputuiError(f"{where}: 'env' has {len(env)} entries, more than {MAX_ENV_ENTRIES}")
    out = {}
    for k, v in env.items():
        if not isinstance(v, str):
            raise GputuiError(
                f"{where}: env value of {printable(k)[:40]!r} is {_kind(v)}, expected a string"
            )
        if len(k) > MAX_STR_CHARS or len(v) > MAX_STR_CHARS:
            raise GputuiError(f"{where}: an env entry is longer than {MAX_STR_CHARS} characters")
        if k in RANK_ENV_VARS:  # only these are ever written; anything else is ignored
            out[k] = printable(v)
    return out


def _cmdline(d: dict[str, Any], where: str) -> tuple[str, ...]:
    args = bounded_list(d, "cmdline", where, MAX_CMDLINE_ARGS)
    total = 0
    for a in args:
        if not isinstance(a, str):
            raise GputuiError(f"{where}: 'cmdline' holds {_kind(a)}, expected strings")
        total += len(a)
    if total > MAX_CMDLINE_CHARS:
        raise GputuiError(f"{where}: 'cmdline' is longer than {MAX_CMDLINE_CHARS} characters")
    return tuple(printable(a) for a in args)


# A process's static fields repeat on every sample (its pid, command line, rank variables):
# checked once, the result is kept, and a later entry with the same static fields only has
# its readings checked. The key holds the type of each number (4000.0 and True compare equal
# to 4000 and 1, and are not pids), so an entry is only ever reused for one that the full
# check would give the same answer.
_PROCESS_CACHE: dict[tuple[Any, ...], ProcessInfo] = {}
_PROCESS_CACHE_MAX = 4096


def _static_key(d: dict[str, Any], gpu: int) -> tuple[Any, ...] | None:
    cmd, env = d.get("cmdline"), d.get("env")
    if d.get("owner") is not None or type(cmd) not in (list, type(None)):
        return None
    if type(env) not in (dict, type(None)):
        return None
    pid, ct, ppid = d.get("pid"), d.get("create_time"), d.get("ppid")
    return (
        gpu, pid, type(pid), ct, type(ct), ppid, type(ppid),
        d.get("user"), d.get("name"), d.get("parent_cmd"), d.get("env_error"),
        tuple(cmd) if cmd else (), tuple(env.items()) if env else (),
    )  # fmt: skip


def process(d: Any, gpu: int, where: str) -> ProcessInfo:
    """One entry of `procs`: an object with a valid pid; other fields typed and bounded."""
    if not isinstance(d, dict):
        raise GputuiError(f"{where}: 'procs' holds {_kind(d)}, expected objects")
    key = _static_key(d, gpu)
    try:
        seen = _PROCESS_CACHE.get(key) if key is not None else None
    except TypeError:  # an unhashable value (a list in the command line): the full check
        seen = key = None
    if seen is not None:
        return _with_readings(seen, d, where)
    info = _process(d, gpu, where)
    if key is not None:
        if len(_PROCESS_CACHE) >= _PROCESS_CACHE_MAX:
            _PROCESS_CACHE.clear()
        _PROCESS_CACHE[key] = info
    return info


def _with_readings(base: ProcessInfo, d: dict[str, Any], where: str) -> ProcessInfo:
    """`base` (checked) with this entry's own readings, checked."""
    out = copy.copy(base)
    set_ = object.__setattr__  # a frozen dataclass: a fresh copy is filled in here only
    set_(out, "state", text(d, "state", where))
    for key, (attr, _lo, _hi) in PROC_READINGS.items():
        set_(out, attr, _proc_reading(d, key, where))
    return out


def _process(d: dict[str, Any], gpu: int, where: str) -> ProcessInfo:
    ppid = number(d.get("ppid"), "ppid", where)
    name = text(d, "name", where)
    return ProcessInfo(
        pid=pid(d.get("pid"), "procs[].pid", where),
        create_time=_optional_reading(d, "create_time", where, 0, T_MAX),
        user=text(d, "user", where),
        name=name,
        cmdline=recorded_argv(_cmdline(d, where), name),  # a recording is anyone's file
        state=text(d, "state", where),
        cpu_percent=_proc_reading(d, "cpu", where),
        rss_mb=_proc_reading(d, "rss_mb", where),
        ppid=int(ppid)
        if ppid is not None and in_range(ppid, 0, PID_MAX_LIMIT, True) is None
        else None,
        parent_cmd=recorded_text(text(d, "parent_cmd", where, MAX_CMDLINE_CHARS)),
        gpus=(gpu,),
        gpu_mem_mb=_proc_reading(d, "gpu_mem_mb", where),
        rank=rank_from_env(_env(d, where)),
        env_error=text(d, "env_error", where),
        live=False,
        owner=owner_from_json(d.get("owner")),
    )


def gpu_row(d: dict[str, Any], t: float, index: int, where: str) -> GpuRow:
    """A GPU line (t and gpu already checked) as a GpuSample and its processes."""
    kw: dict[str, Any] = {}
    na: dict[str, str] = {}
    for key, attr, lo, hi, integral in GPU_READINGS:
        if d.get(key) is None:
            kw[attr] = None
            continue
        v, why = reading(d, key, where, lo, hi, integral)
        kw[attr] = v
        if why is not None:
            na[attr] = why
    pids = tuple(pid(p, "pids", where) for p in bounded_list(d, "pids", where, MAX_PROCS_PER_GPU))
    mem: dict[int, float | None] = {}
    for pair in bounded_list(d, "proc_mem", where, MAX_PROCS_PER_GPU):
        if not isinstance(pair, list) or len(pair) != 2:
            raise GputuiError(f"{where}: 'proc_mem' holds {_kind(pair)}, expected [pid, MiB] pairs")
        p = pid(pair[0], "proc_mem", where)
        mb = number(pair[1], "proc_mem", where)
        mem[p] = None if mb is None or in_range(mb, 0, MIB_MAX) else float(mb)
    procs: dict[int, ProcessInfo] = {}
    for entry in bounded_list(d, "procs", where, MAX_PROCS_PER_GPU):
        proc = process(entry, index, where)
        procs[proc.pid] = proc
    gpu = GpuSample(
        index=index,
        name=text(d, "name", where),
        uuid=text(d, "uuid", where),
        pids=pids,
        proc_mem_mb=tuple(mem.items()),
        na=na,
        **kw,
    )
    return GpuRow(t=t, gpu=gpu, phase=text(d, "phase", where), procs=procs, mem=mem)
