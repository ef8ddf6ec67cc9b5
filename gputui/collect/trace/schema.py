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

Here the bounds and the check of one field (its JSON type, its range, its text); a whole GPU
line is checked in gpu_line.py and a line's bytes parsed in lines.py. Those read each bound
as `schema.NAME` when they run, so a test may lower one bound for a file.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeGuard

from gputui.collect.trace.record_spec import kind_of
from gputui.errors import GputuiError

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
# The keys of a plain GPU line that the fast history path reads, in order
# (gputui.collect.trace.plain_lines, plain_typed).
PLAIN_KEYS = ("t", "gpu", *(r[0] for r in GPU_READINGS), "pids", "name", "uuid", "phase")

# Ranges of a process's readings: a value outside becomes None. file key -> (ProcessInfo
# attribute, low, high); the full reader and the templates (template.py) both read this.
PROC_READINGS: dict[str, tuple[str, float, float]] = {
    "cpu": ("cpu_percent", 0, 100 * 8192),  # 100 per CPU
    "rss_mb": ("rss_mb", 0, MIB_MAX),
    "gpu_mem_mb": ("gpu_mem_mb", 0, MIB_MAX),
}


# ---------------------------------------------------------------- field checks


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
        raise GputuiError(f"{where}: '{key}' is {kind_of(v)}, expected a string")
    if len(v) > limit:
        raise GputuiError(f"{where}: '{key}' is longer than {limit} characters")
    return printable(v)


def is_number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def number(v: Any, key: str, where: str) -> int | float | None:
    """A value that must be a JSON number or null (a bool or a string is an error)."""
    if v is None or is_number(v):
        return v
    raise GputuiError(f"{where}: '{key}' is {kind_of(v)}, expected a number")


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
            f"{where}: '{key}' holds {kind_of(v)} that is not a pid (1..{PID_MAX_LIMIT})"
        )
    return v


def bounded_list(d: dict[str, Any], key: str, where: str, limit: int) -> list[Any]:
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise GputuiError(f"{where}: '{key}' is {kind_of(v)}, expected a list")
    if len(v) > limit:
        raise GputuiError(f"{where}: '{key}' has {len(v)} entries, more than {limit}")
    return v
