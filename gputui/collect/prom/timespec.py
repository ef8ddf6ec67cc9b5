"""--from and --to: epoch seconds, ISO 8601, or relative to now ("3h ago", "now").

The clock is read once by the caller and passed in, so a window given as "2h ago" .. "now"
is exactly two hours wide and a test can pin "now".
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

from gputui.errors import GputuiError

_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}
_RELATIVE = re.compile(
    r"^(?P<n>\d{1,9}(?:\.\d{1,6})?)\s*(?P<u>s|sec|m|min|h|d|w)\s+ago$", re.IGNORECASE
)
# Earliest and latest instants accepted: GPUs with dcgm-exporter did not exist before 2000,
# and a time past 2100 is a typo (milliseconds given as seconds, say).
_EARLIEST, _LATEST = 946684800.0, 4102444800.0


def parse_time(text: str, now: float, what: str = "--from") -> float:
    """Unix seconds for `text`; a GputuiError (one line, exit 2) for anything else.

    Args:
        text: Unix seconds, an ISO 8601 time, `now`, or a time ago (`3h ago`, `90 s ago`).
        now: the time `now` stands for (Unix seconds).
        what: the option's name, for the error message.

    Returns:
        Unix seconds.

    Raises:
        GputuiError: anything else (one line, exit 2).
    """
    s = text.strip()
    if s.lower() == "now":
        return now
    m = _RELATIVE.match(s)
    if m:
        return now - float(m["n"]) * _UNITS[m["u"].lower()]
    try:
        t = float(s)
    except ValueError:
        t = _iso(s)
    else:
        if not math.isfinite(t):
            t = math.nan
    if math.isnan(t):
        raise GputuiError(
            f"{what} {text[:60]!r}: not a time (epoch seconds, ISO 8601 such as "
            "2026-11-28T03:10:00Z, '3h ago' or 'now')"
        )
    if not _EARLIEST <= t <= _LATEST:
        raise GputuiError(f"{what} {text[:60]!r}: out of range (years 2000 to 2100)")
    return t


def _iso(s: str) -> float:
    """ISO 8601; a time without a zone is UTC (a cluster's logs are, mostly); nan if not."""
    try:
        d = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return math.nan
    if d.tzinfo is None:
        d = d.replace(tzinfo=timezone.utc)
    return d.timestamp()


def window(start: str, end: str, now: float) -> tuple[float, float]:
    """(from, to) checked: from before to.

    Args:
        start: the `--from` value.
        end: the `--to` value.
        now: the time `now` stands for (Unix seconds).

    Returns:
        (from, to) in Unix seconds.

    Raises:
        GputuiError: a bad time, or from not before to (exit 2).
    """
    t0, t1 = parse_time(start, now, "--from"), parse_time(end, now, "--to")
    if t1 <= t0:
        raise GputuiError(f"--from {start[:40]!r} is not before --to {end[:40]!r}")
    return t0, t1


def iso(t: float) -> str:
    """A sample's time as people read it in a log: UTC, seconds.

    Args:
        t: Unix seconds.

    Returns:
        `YYYY-MM-DDTHH:MM:SSZ`.
    """
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
