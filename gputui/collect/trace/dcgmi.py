"""The text that `dcgmi dmon` prints, read as a recording.

Why: DCGM's `dcgmi dmon -e 203,204,155,150,100,101,252 -d 1000 >> gpu.log` is the GPU
history many nodes that run DCGM already keep (beside, or instead of, nvidia-smi's CSV). It
is a table: a header naming each field by DCGM's short name, a units line, then one row per
GPU per sample, the header again every 14 samples:

    #Entity         GPUTL             MCUTL             POWER             TMPTR
    ID                                                  W                 C
    GPU 0           100               0                 123.456           45
    GPU 1           0                 0                 71.250            33

- Columns read (any subset, any order; the field ID for `-e` in brackets): GPUTL (203)
  util, MCUTL (204) memory traffic, POWER (155) power, PMLMT (160) or EPLMT (164) the power
  limit, FBUSD (252) and FBTTL (250) memory used and total (MiB), TMPTR (150), SMCLK (100),
  MMCLK (101), PSTAT (190), DVCCTR (112, the clock event reasons). Others (SMACT 1002,
  SMOCC 1003, DRAMA 1005, ...) are allowed and not read: the detector judges from util,
  memory traffic and power. `N/A` (and a blank cell, or a value dmon cut short with `...`)
  is a reading not available; so is a number outside its field's range (as in a recording).
- dmon prints no time. A line `#time start=2026-11-28T10:15:00Z d=1000` (written before
  dmon starts; `start` in ISO 8601 UTC or Unix seconds, `d` the `-d` in ms, each optional)
  says when the rows after it began and how far apart they are. Without `start` the file's
  last sample is taken at the file's modification time (a log dmon still appends to, or
  stopped appending to); without `d`, dmon's default of 1000 ms. A `#time` line with a
  `start` starts a new run (several runs appended to one log); one without follows on.
  Only the differences matter to the detector; `check` prints seconds into the file.
- Rows of entities other than a GPU (a MIG instance `GPU-I`/`GPU-CI`, an NVLink `GPU 0
  LINK 3`, a switch) are skipped: the GPU's own row holds its readings. The header repeated
  every 14 samples, the units line and dmon's last words at Ctrl-C are skipped too.
- A sample is one row per GPU: a GPU seen again starts the next sample (the rule of
  gputui.collect.trace.grouping, which also keeps time order and the bounds).

The file comes through the bounded reader of recordings (gputui.collect.trace.lines).
Anything else is one line naming the file and line (GputuiError), never a guess: a header
that is not dmon's, a row with more or fewer values than the header names (a line cut
short), a value that does not read, a `#time` line that does not. dmon lists no processes,
so the samples say none is known (`procs_listed` False): the detector takes the node's GPUs
in use as one job (gputui.diagnose.job_groups), as for nvidia-smi's CSV.
"""

from __future__ import annotations

import math
import os
import re
from datetime import datetime
from pathlib import Path

from gputui.collect.trace import schema
from gputui.collect.trace.columns import FLOAT_ATTRS, Columns
from gputui.collect.trace.grouping import OPENED, REPEAT, Grouping
from gputui.collect.trace.lines import iter_lines, shown, text_line
from gputui.errors import GputuiError

MAX_DMON_LINE = 64 << 10
"""A dmon row holds a few dozen fields of at most 20 characters: longer is not its output."""

DEFAULT_D_MS = 1000.0
"""dmon's `-d` when none is given."""

# DCGM's short name (the header's word) -> GpuSample attribute.
FIELDS = {
    "GPUTL": "util",
    "MCUTL": "mem_util",
    "POWER": "power_w",
    "PMLMT": "power_limit_w",
    "EPLMT": "power_limit_w",
    "FBUSD": "mem_used_mb",
    "FBTTL": "mem_total_mb",
    "TMPTR": "temp_c",
    "SMCLK": "sm_mhz",
    "MMCLK": "mem_mhz",
    "PSTAT": "pstate",
    "DVCCTR": "events",
}
_READ = ", ".join(FIELDS)
_RANGES = {attr: (lo, hi) for _key, attr, lo, hi, _int in schema.GPU_READINGS}
_HEADER = re.compile(r"#\s*Entity\b(.*)")
_SHORT = re.compile(r"[A-Z][A-Z0-9_#]{0,15}")
_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")
_TIME = re.compile(r"#time\b(.*)")
_OTHER_ENTITIES = frozenset({"GPU-I", "GPU-CI", "vGPU", "Switch", "SW", "CPU", "Core", "Link"})


def looks_like_dmon(path: str | Path) -> bool:
    """Whether the file's first line is dmon's header (`#Entity ...`) or a `#time` line
    (read through the bounded reader; any trouble reading it is the full reader's: False)."""
    try:
        lines = iter_lines(path)
        try:
            data, _ended, _n = next(lines)
        finally:
            lines.close()
    except (GputuiError, StopIteration):
        return False
    head = data.lstrip()[:16]
    return head.startswith(b"#time") or re.match(rb"#\s*Entity\b", head) is not None


class _Clock:
    """The time of each sample: runs of `d` ms from a start (see the module's docstring)."""

    def __init__(self) -> None:
        self.d = DEFAULT_D_MS / 1000
        self.start: float | None = None  # the next sample's time, when a line gave it
        self.last: float | None = None  # the last sample's time
        self.absolute = False  # a `start` was given: times are Unix seconds

    def line(self, text: str, where: str) -> None:
        got: dict[str, str] = {}
        for word in text.split():
            key, eq, value = word.partition("=")
            if not eq or key not in ("start", "d") or key in got:
                raise GputuiError(
                    f"{where}: a #time line holds start=TIME and d=MS, not {shown(word[:40])!r}"
                )
            got[key] = value
        if "d" in got:
            if _NUMBER.fullmatch(got["d"]) is None or not 1 <= float(got["d"]) <= 86_400_000:
                raise GputuiError(f"{where}: d={shown(got['d'][:20])} is not 1..86400000 ms")
            self.d = float(got["d"]) / 1000
        if "start" in got:
            if self.last is not None and not self.absolute:
                raise GputuiError(
                    f"{where}: a #time line with a start comes after samples without one "
                    "(give the first run its start too)"
                )
            self.start, self.absolute = _start(got["start"], where), True

    def tick(self, where: str) -> float:
        if self.start is not None:
            t, self.start = self.start, None
        else:
            t = 0.0 if self.last is None else self.last + self.d
        if t > schema.T_MAX:
            raise GputuiError(f"{where}: the samples run past a plausible time (start, d)")
        self.last = t
        return t


def _start(text: str, where: str) -> float:
    if _NUMBER.fullmatch(text):
        t = float(text)
    else:
        try:
            stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            stamp = None
        if stamp is None or stamp.tzinfo is None:
            raise GputuiError(
                f"{where}: start={shown(text[:40])} is not a time (ISO 8601 with its zone, "
                "as `date -u +%FT%TZ` prints, or Unix seconds)"
            )
        t = stamp.timestamp()
    if not 0 <= t <= schema.T_MAX:
        raise GputuiError(f"{where}: start={shown(text[:40])} is not a plausible time")
    return t


def _header(line: str, where: str) -> list[str]:
    m = _HEADER.match(line.strip())
    if m is None:
        raise GputuiError(f"{where}: not dcgmi dmon's header (#Entity and DCGM's field names)")
    names = m.group(1).split()
    for name in names:
        if _SHORT.fullmatch(name) is None:
            raise GputuiError(
                f"{where}: header: {shown(name[:20])!r} is not a DCGM field's short name"
            )
    if "DVNAM" in names:
        raise GputuiError(
            f"{where}: header: DVNAM (the GPU's name) holds spaces that dmon's columns do "
            "not delimit: leave field 50 out of -e"
        )
    if not set(names) & FIELDS.keys():
        raise GputuiError(
            f"{where}: header: none of the fields gputui reads ({_READ}): "
            "ask dmon for -e 203,204,155,..."
        )
    return names


def _cells(line: str, heads: list[str], header: str, where: str) -> list[str] | None:
    """The row's values, one per header field; None for a row of another entity."""
    words = line.split()
    if len(words) > 2 and words[2] == "LINK":
        return None  # an NVLink's row (`GPU 0 LINK 3`)
    if words[0] != "GPU" or len(words) < 2:
        if words[0] in _OTHER_ENTITIES or words[0].startswith(("GPU-", "SW")):
            return None
        raise GputuiError(f"{where}: not a dcgmi dmon row: {shown(line[:40])!r}")
    values = words[2:]
    if len(values) != len(heads) and header.startswith("#Entity"):
        # dmon 3 pads each value to its column and leaves a cell it has no value for blank:
        # read the columns where the header puts them, in a row that reaches the last one
        # (a row cut short does not)
        starts = [m.start() for m in re.finditer(r"\S+", header)][1:]
        if len(starts) == len(heads) and len(line) > starts[-1]:
            ends = [*starts[1:], len(line)]
            values = [line[a:b].strip() for a, b in zip(starts, ends, strict=True)]
            if any(" " in v for v in values):
                values = []
    if len(values) != len(heads):
        raise GputuiError(
            f"{where}: {len(values)} values where the header names {len(heads)} (a line cut short?)"
        )
    return [words[1], *values]


def _value(text: str, head: str, where: str) -> float | None:
    if text in ("", "N/A") or text.endswith("..."):
        return None
    if _NUMBER.fullmatch(text) is None:
        raise GputuiError(f"{where}: column {head!r}: not a number: {shown(text[:40])!r}")
    return float(text)


def read_dmon(path: str | Path) -> Columns:
    """The file's GPU rows as columns. GputuiError (one line) on anything it cannot read."""
    name = shown(path)
    grouping = Grouping(name)
    cols = Columns(procs_listed=False)
    clock = _Clock()
    heads: list[str] | None = None
    header = ""
    after_header = False
    seen: set[int] = set()  # the open sample's GPUs
    t = 0.0
    lines = iter_lines(path)
    try:
        for data, ended, n in lines:
            where = grouping.where(n)
            line = text_line(data, where, MAX_DMON_LINE, "dmon")
            text = line.strip()
            if not text:
                continue  # a line of whitespace alone, as str sees it
            if not ended:
                raise GputuiError(f"{where}: the last line is cut short (no end of line)")
            if (m := _TIME.match(text)) is not None:
                clock.line(m.group(1), where)
                seen = set()  # a run of its own
                continue
            if text.startswith("#") or heads is None:
                heads, header, after_header = _header(line, where), line, True
                continue
            if after_header and text.split()[0] in ("ID", "Id"):
                after_header = False
                continue  # the units line
            after_header = False
            if text.startswith("dmon was stopped"):
                continue  # its last words at Ctrl-C
            cells = _cells(line, heads, header, where)
            if cells is None:
                continue
            gpu_text, values = cells[0], cells[1:]
            if (
                not (gpu_text.isascii() and gpu_text.isdigit())
                or int(gpu_text) > schema.MAX_GPU_INDEX
            ):
                raise GputuiError(
                    f"{where}: GPU {shown(gpu_text[:20])!r} is not 0..{schema.MAX_GPU_INDEX}"
                )
            gpu = int(gpu_text)
            if not seen or gpu in seen:
                t, seen = clock.tick(where), set()
            seen.add(gpu)
            _row(t, gpu, heads, values, where, n, data, grouping, cols)
    finally:
        lines.close()
    if not len(cols):
        raise GputuiError(f"{name}: no samples in file")
    if not clock.absolute:  # the last sample at the file's last write
        try:
            mtime = os.stat(path).st_mtime
        except OSError as e:
            raise GputuiError(f"{name}: cannot read its modification time ({e.strerror})") from None
        shift = max(min(mtime, schema.T_MAX) - cols.t[-1], 0.0)
        for k in range(len(cols.t)):
            cols.t[k] += shift
    return cols


def _row(
    t: float,
    gpu: int,
    heads: list[str],
    values: list[str],
    where: str,
    n: int,
    data: bytes,
    grouping: Grouping,
    cols: Columns,
) -> None:
    got: dict[str, float | None] = {}
    for head, text in zip(heads, values, strict=True):
        attr = FIELDS.get(head)
        if attr is None or got.get(attr) is not None:
            continue
        v = _value(text, head, where)
        lo, hi = _RANGES[attr]
        got[attr] = v if v is not None and math.isfinite(v) and lo <= v <= hi else None
    placed = grouping.place(t, gpu, data, n, close=_nothing)
    if placed == REPEAT:
        return
    if placed == OPENED:
        cols.starts.append(len(cols.t))
    cols.t.append(t)
    cols.gpu.append(gpu)
    for attr in FLOAT_ATTRS:
        x = got.get(attr)
        cols.floats[attr].append(x if x is not None else math.nan)
    for attr in ("pstate", "events"):
        x = got.get(attr)
        cols.ints[attr].append(int(x) if x is not None else None)
    cols.pids.append(())
    cols.names.append(None)
    cols.uuids.append(None)
    cols.phases.append(None)


def _nothing() -> None:
    """Columns keep no open sample to finish when the next opens."""
