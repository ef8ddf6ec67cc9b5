"""The CSV that `nvidia-smi --query-gpu=... --format=csv -l N` writes, read as a recording.

Why: a cron job or a sidecar that logs `nvidia-smi --query-gpu=timestamp,index,
utilization.gpu,utilization.memory,power.draw,power.limit,memory.used,temperature.gpu,
clocks.sm --format=csv -l 1` is the GPU history many nodes already keep. Its header names
the columns (any subset, any order), so it is recognised by its first line and read into
the same columns as a recording of plain GPU lines (gputui.collect.trace.columns):

    timestamp, index, utilization.gpu [%], utilization.memory [%], power.draw [W], ...
    2026/11/22 10:15:01.123, 0, 100 %, 0 %, 122.31 W, 700.00 W, 40213 MiB, 45, 1980 MHz

- `--format=csv,nounits` leaves the units off the values (the header keeps them); both read.
- `timestamp` and `index` are required; the other columns are optional, unknown ones
  ignored. `[N/A]`, `[Not Supported]` and any other bracketed word is a reading not
  available (None); so is a number outside its field's range (as in a recording).
- nvidia-smi prints the node's local time without a zone: it is read as UTC. Only the
  differences matter to the detector; a verdict's time is shown as seconds into the file.
- A header repeated further down (several runs appended to one log) is skipped.
- Rows are grouped into samples by the recording's own rule (gputui.collect.trace.grouping):
  one row per GPU, time order, no second reading of a GPU at one time.

The file comes through the bounded reader of recordings (gputui.collect.trace.lines:
special files, gzip, byte and line limits). Anything else wrong is one line naming the
file and line (GputuiError), never a guess: a row of the wrong width, a timestamp or a
number that does not read, a GPU index out of range, time going backwards. nvidia-smi
lists no processes in this query, so the samples say none is known (`procs_listed`
False): the detector takes the node's GPUs in use as one job (gputui.diagnose.job_groups).
"""

from __future__ import annotations

import calendar
import math
import re
from pathlib import Path

from gputui.collect.trace import schema
from gputui.collect.trace.columns import FLOAT_ATTRS, Columns
from gputui.collect.trace.grouping import OPENED, REPEAT, Grouping
from gputui.collect.trace.lines import iter_lines, shown, text_line
from gputui.errors import GputuiError

MAX_CSV_LINE = 64 << 10
"""A row of nvidia-smi's query has a few dozen fields of a few characters (GPU names are
under 100): longer is not its output."""

# nvidia-smi's field name (header, units stripped) -> GpuSample attribute. The aliases are
# the names the query takes and the names the header prints for them.
FIELDS = {
    "utilization.gpu": "util",
    "utilization.memory": "mem_util",
    "power.draw": "power_w",
    "power.draw.average": "power_w",
    "power.draw.instant": "power_w",
    "power.limit": "power_limit_w",
    "enforced.power.limit": "power_limit_w",
    "memory.used": "mem_used_mb",
    "memory.total": "mem_total_mb",
    "temperature.gpu": "temp_c",
    "clocks.sm": "sm_mhz",
    "clocks.current.sm": "sm_mhz",
    "clocks.mem": "mem_mhz",
    "clocks.current.memory": "mem_mhz",
    "pstate": "pstate",
    "clocks_event_reasons.active": "events",
    "clocks_throttle_reasons.active": "events",
    "name": "name",
    "gpu_name": "name",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
}
_RANGES = {attr: (lo, hi) for _key, attr, lo, hi, _int in schema.GPU_READINGS}
_HEAD = re.compile(r"[a-z_]+(?:\.[a-z_]+)*(?: \[[^\]]{1,16}\])?")
_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")
_STAMP = re.compile(
    r"([0-9]{4})/([0-9]{2})/([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?"
)


def _field(head: str) -> str:
    return head.split(" [", 1)[0].strip().lower()


def _header(line: str) -> list[str] | None:
    """The fields of an nvidia-smi CSV header line, or None when it is not one."""
    heads = [h.strip() for h in line.split(",")]
    if not all(_HEAD.fullmatch(h.lower()) for h in heads):
        return None
    names = [_field(h) for h in heads]
    return names if "timestamp" in names or "index" in names else None


def looks_like_smi_csv(path: str | Path) -> bool:
    """Whether the file's first line is an nvidia-smi CSV header (read through the bounded
    reader; any trouble reading it is the full reader's to say: False)."""
    try:
        lines = iter_lines(path)
        try:
            data, _ended, _n = next(lines)
        finally:
            lines.close()
    except (GputuiError, StopIteration):
        return False
    if data[:1] in (b"{", b"["):
        return False
    try:
        return _header(data.decode("utf-8")) is not None
    except UnicodeDecodeError:
        return False


def _stamp(text: str, where: str) -> float:
    m = _STAMP.fullmatch(text)
    if m is None:
        raise GputuiError(
            f"{where}: timestamp {schema.printable(text[:40])!r} is not nvidia-smi's "
            "YYYY/MM/DD HH:MM:SS.mmm"
        )
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    try:
        t = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + float("0" + (m.group(7) or ""))
    except (ValueError, OverflowError):
        t = -1.0
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 61) or not (
        0 <= t <= schema.T_MAX
    ):
        raise GputuiError(f"{where}: timestamp {text!r} is not a plausible time")
    return t


def _number(text: str, head: str, where: str) -> float | None:
    """A reading: None for a bracketed word ([N/A], [Not Supported]...), the number with
    its unit (if any) taken off, else an error."""
    if text.startswith("[") and text.endswith("]"):
        return None
    value = text.split(" ", 1)[0]
    if _NUMBER.fullmatch(value) is None:
        if value.startswith("P") and value[1:].isdigit() and len(value) <= 3:  # pstate P0
            return float(value[1:])
        if value.startswith("0x") and 2 < len(value) <= 18:  # a bitmask, in hex
            try:
                return float(int(value, 16))
            except ValueError:
                pass
        raise GputuiError(
            f"{where}: column {head!r}: not a number: {schema.printable(text[:40])!r}"
        )
    return float(value)


def read_smi_csv(path: str | Path) -> Columns:
    """The CSV's rows as columns. GputuiError (one line) on anything it cannot read."""
    name = shown(path)
    grouping = Grouping(name)
    cols = Columns(procs_listed=False)
    heads: list[str] | None = None
    header_line = ""
    shown_heads: list[str] = []
    lines = iter_lines(path)
    try:
        for data, _ended, n in lines:
            where = grouping.where(n)
            line = text_line(data, where, MAX_CSV_LINE, "a CSV row")
            if heads is None:
                heads = _header(line)
                if heads is None:
                    raise GputuiError(f"{where}: not an nvidia-smi CSV header")
                for need in ("timestamp", "index"):
                    if need not in heads:
                        raise GputuiError(
                            f"{where}: the CSV has no {need!r} column (query it with "
                            "--query-gpu=timestamp,index,...)"
                        )
                header_line = line.strip()
                shown_heads = [h.strip() for h in line.split(",")]
                continue
            if line.strip() == header_line:
                continue  # another run appended to the same log
            _row(line, heads, shown_heads, where, n, grouping, cols)
    finally:
        lines.close()
    if not len(cols):
        raise GputuiError(f"{name}: no samples in file")
    return cols


def _row(
    line: str,
    heads: list[str],
    shown_heads: list[str],
    where: str,
    n: int,
    grouping: Grouping,
    cols: Columns,
) -> None:
    values = [v.strip() for v in line.split(",")]
    if len(values) != len(heads):
        raise GputuiError(f"{where}: {len(values)} fields where the header names {len(heads)}")
    got: dict[str, float | str | None] = {}
    t = -1.0
    gpu = -1
    for head, shown_head, text in zip(heads, shown_heads, values, strict=True):
        if head == "timestamp":
            t = _stamp(text, where)
        elif head == "index":
            if not text.isdigit() or int(text) > schema.MAX_GPU_INDEX:
                raise GputuiError(
                    f"{where}: GPU index {schema.printable(text[:20])!r} is not 0.."
                    f"{schema.MAX_GPU_INDEX}"
                )
            gpu = int(text)
        elif head in FIELDS:
            attr = FIELDS[head]
            if attr in ("name", "uuid"):
                got[attr] = None if text.startswith("[") else schema.printable(text[:256])
            elif attr not in got or got[attr] is None:
                v = _number(text, shown_head, where)
                lo, hi = _RANGES[attr]
                got[attr] = v if v is not None and math.isfinite(v) and lo <= v <= hi else None
    placed = grouping.place(t, gpu, line.encode(), n, close=_nothing)
    if placed == REPEAT:
        return
    if placed == OPENED:
        if len(cols.starts) >= schema.MAX_SAMPLES:
            raise GputuiError(f"{where}: more than {schema.MAX_SAMPLES} samples in one file")
        cols.starts.append(len(cols.t))
    cols.t.append(t)
    cols.gpu.append(gpu)
    for attr in FLOAT_ATTRS:
        x = got.get(attr)
        cols.floats[attr].append(x if isinstance(x, float) else math.nan)
    for attr in ("pstate", "events"):
        x = got.get(attr)
        cols.ints[attr].append(int(x) if isinstance(x, float) else None)
    cols.pids.append(())
    cols.names.append(got.get("name"))  # type: ignore[arg-type]
    cols.uuids.append(got.get("uuid"))  # type: ignore[arg-type]
    cols.phases.append(None)


def _nothing() -> None:
    """Columns keep no open sample to finish when the next opens."""
