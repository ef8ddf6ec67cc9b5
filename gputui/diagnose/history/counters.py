"""Xids, error counters and nodes that left the scrape, read from the columns.

- dcgm-exporter's DCGM_FI_DEV_XID_ERRORS holds the *last* Xid number the GPU reported, not
  a count: an Xid happened where the value changes to another non-zero number (the same
  number twice in a row is one report). The catalogue (gputui.collect.nvml.xid) says whose
  fault it is; a hardware Xid makes the GPU sick (exit 3).
- ECC, row-remap and NVLink error counters only count up, until the driver reloads or the
  node reboots and they start from 0 again. Only what they added inside the window counts,
  summed as Prometheus' increase() does: a drop is a reset, after which the new value is
  all new. A reset is said, never read as errors.
- A node whose every GPU has no sample for two or more steps while other nodes report was
  missing from the scrape: said with when it left and when (if) it came back.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from gputui.collect.nvml.xid import HARDWARE, info
from gputui.collect.prom.columns import SEEN, GpuColumns, History
from gputui.collect.prom.timespec import iso
from gputui.diagnose.exitcodes import OK, SICK_GPU
from gputui.diagnose.history.judge import Event, gpu_ref, gpu_words, sample_time

# counter column -> (what one count is, whether any increase makes the GPU sick)
COUNTERS = {
    "ecc_dbe": ("uncorrectable (double-bit) ECC error", True),
    "ecc_dbe_agg": ("uncorrectable ECC error (aggregate)", True),
    "remapped_uncorrectable": ("row remapped for an uncorrectable error", True),
    "nvlink_crc_flit": ("NVLink CRC flit error", False),
    "nvlink_crc_data": ("NVLink CRC data error", False),
    "nvlink_replay": ("NVLink replay", False),
    "nvlink_recovery": ("NVLink recovery", False),
}


@dataclass(frozen=True)
class Increase:
    """What a counter added over the window, and the steps where it reset."""

    added: float
    first_k: int | None  # the first step that added
    resets: tuple[int, ...]


def increase(col: array) -> Increase:
    """Sum of rises, a drop counted as a reset (the new value is new)."""
    added, first, resets, prev = 0.0, None, [], None
    for k, x in enumerate(col):
        if x != x:
            continue
        if prev is not None:
            d = x - prev if x >= prev else x
            if x < prev:
                resets.append(k)
            if d > 0:
                added += d
                first = k if first is None else first
        prev = x
    return Increase(added, first, tuple(resets))


def xid_events(hist: History) -> list[Event]:
    out = []
    for g in hist.gpus:
        col = g.cols.get("xid")
        if col is None:
            continue
        prev: float | None = None
        for k, x in enumerate(col):
            if x != x:
                continue
            if x > 0 and x != prev:
                out.append(_xid(hist, g, k, int(x), first=prev is None))
            prev = x
    return out


def _xid(hist: History, g: GpuColumns, k: int, xid: int, first: bool) -> Event:
    x = info(xid)
    hw = x.kind == HARDWARE
    when = " (already the last Xid at the window's start)" if first else ""
    text = f"XID      {gpu_words(g, hist, k)}: Xid {xid}, {x.meaning} ({x.kind}: {x.action}){when}"
    data = {
        **gpu_ref(g, hist, k),
        "xid": xid,
        "meaning": x.meaning,
        "fault": x.kind,
        "action": x.action,
        "before_window": first,
    }
    # An Xid already set when the window starts happened before it: told, not judged.
    return Event(sample_time(g, hist, k), "xid", text, data, SICK_GPU if hw and not first else OK)


def counter_events(hist: History) -> list[Event]:
    out = []
    for g in hist.gpus:
        for name, (what, sick) in COUNTERS.items():
            col = g.cols.get(name)
            if col is None:
                continue
            inc = increase(col)
            for k in inc.resets:
                out.append(
                    Event(
                        sample_time(g, hist, k),
                        "counter_reset",
                        f"RESET    {gpu_words(g, hist, k)}: the {what} counter started again "
                        "from 0 (a driver reload or a reboot): not counted as errors",
                        {**gpu_ref(g, hist, k), "counter": name},
                    )
                )
            if inc.added > 0 and inc.first_k is not None:
                k = inc.first_k
                out.append(
                    Event(
                        sample_time(g, hist, k),
                        "errors",
                        f"{'SICK    ' if sick else 'ERRORS  '} {gpu_words(g, hist, k)}: "
                        f"{inc.added:.0f} {what}(s) in the window, the first by "
                        f"{iso(sample_time(g, hist, k))}",
                        {**gpu_ref(g, hist, k), "counter": name, "added": inc.added},
                        SICK_GPU if sick else OK,
                    )
                )
        fail = g.cols.get("remap_failure")
        if fail is not None:
            at = next((k for k, x in enumerate(fail) if x == x and x > 0), None)
            if at is not None:
                k = at
                out.append(
                    Event(
                        hist.time(k),
                        "errors",
                        f"SICK     {gpu_words(g, hist, k)}: row remapping failed",
                        {**gpu_ref(g, hist, k), "counter": "remap_failure", "added": 1},
                        SICK_GPU,
                    )
                )
    return out


def missing_nodes(hist: History) -> list[Event]:
    """Each stretch of two or more steps where a node had no sample while another had."""
    by_host: dict[str, list[array]] = {}
    seen: dict[str, list[array]] = {}
    for g in hist.gpus:
        util = g.cols.get("util")
        if util is not None:
            by_host.setdefault(g.host, []).append(util)
        if SEEN in g.cols:
            seen.setdefault(g.host, []).append(g.cols[SEEN])
    if len(by_host) < 2:
        return []
    n = hist.n
    has = {h: [any(c[k] == c[k] for c in cols) for k in range(n)] for h, cols in by_host.items()}
    anyone = [any(v[k] for v in has.values()) for k in range(n)]
    first = {h: next((k for k in range(n) if v[k]), n) for h, v in has.items()}
    out = []
    for host, v in sorted(has.items()):
        k = first[host]
        while k < n:
            if v[k] or not anyone[k]:
                k += 1
                continue
            end = k
            while end < n and not v[end]:
                end += 1
            if end - k >= 2 and any(anyone[k:end]):
                back = f", back at {iso(hist.time(end))}" if end < n else ", not back"
                last = max(
                    (c[k - 1] for c in seen.get(host, ()) if k and c[k - 1] == c[k - 1]),
                    default=None,
                )
                said = f"last sample at {iso(last)}" if last is not None else "no sample before"
                out.append(
                    Event(
                        hist.time(k),
                        "node_missing",
                        f"MISSING  node {host}: missing from the scrape ({said}{back}): the "
                        "node, its exporter, or the network",
                        {
                            "host": host,
                            "last_sample": last,
                            "from": hist.time(k),
                            "to": hist.time(end) if end < n else None,
                        },
                    )
                )
            k = end
    return out
