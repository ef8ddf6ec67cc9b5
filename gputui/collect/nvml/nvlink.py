"""NVLink error counters: read rarely, spread out, on a thread of their own.

Why: the driver charges about 0.8 ms of CPU for each (counter, link) read, batched or not
(4 x H200, driver 580: 54 (field, link) pairs in one nvmlDeviceGetFieldValues call took
43 ms; the `*_TOTAL` NVLink fields answer NOT_SUPPORTED there), and a GPU has up to 18 links
and 4 counters. Read with the samples (72 reads of every GPU every 5 s, and once before the
first frame) that was most of gputui's CPU on a 4-GPU node and delayed its first frame.
Healthy links count a few corrected errors a minute each, so health needs rates (errors a
minute, gputui.diagnose.health.link_rates) over a span of minutes, not totals every few seconds.

The schedule: one GPU per slot, in turn, a slot being the pass (PASS_S, 5 minutes; the
GPUTUI_NVLINK_PASS_S variable changes it) divided by the GPUs that have NVLink, so each GPU's
links are read once a pass: 4 GPUs, one every 75 s; 8 GPUs, one every 37.5 s. One GPU's read
is its link states (microseconds each) and, for each link that is up, its 4 error counters
(replay, recovery, CRC flit, CRC data) through nvmlDeviceGetNvLinkErrorCounter, the per-link
call that answers on every NVLink GPU (18 x 4 x 0.8 ms = 58 ms). Its cost: 4 GPUs x 18 links
x 4 counters x 0.8 ms = 230 ms of CPU a pass, 46 ms a minute (0.08 % of a core); 8 GPUs,
92 ms a minute (0.15 %). Why not a pass a minute: that was 0.4 % of a core on 4 GPUs, a third
of what nvitop costs there in all (1.16 %), and the dashboard's budget is half of nvitop's
(BENCHMARKS.md, section 14); a link going bad counts hundreds to thousands a minute, which a
rate over 5 minutes shows as well as one over 1.

Bounded: each GPU's read is one unit of an NVML side thread (nvml_thread.side_thread) with
the reader's deadline, so a sample never waits behind a counter read, and one that
overstays ends the reading (the note names the call) and makes the process leave without
nvmlShutdown, as a hang of the samples' thread does. Nothing is read before `start()`: the
HealthMonitor calls it at its second poll, after the first sample is out (the dashboard's
first frame, `check`'s first line); `snapshot`, `dump` and `bundle` never start it.

A counter that a GPU does not support (NotSupported, FunctionNotFound, InvalidArgument) is
n/a with its reason, said once and not asked again; a GPU whose first link has no state (no
NVLink: a VM, a PCIe card) is n/a and leaves the schedule.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from gputui.collect.nvml.thread import NvmlHung, side_thread

PASS_S = 300.0  # every GPU's links read once in this long
PASS_ENV = "GPUTUI_NVLINK_PASS_S"
PASS_MIN_S, PASS_MAX_S = 1.0, 3600.0
NVLINK_MAX = 18  # links asked per GPU (H100, H200: 18); the first that is not there ends it
COUNTERS = (("replay", 0), ("recovery", 1), ("crc_flit", 2), ("crc_data", 3))
MAX_PENDING = 64  # reads kept until taken (a poller that stopped polling stays bounded)
JOIN_S = 2.0  # close() waits this long for a read in progress to stop between links


def pass_seconds(env: dict[str, str] | None = None) -> tuple[float, str | None]:
    """The pass from GPUTUI_NVLINK_PASS_S (default PASS_S), and a note when it is not usable."""
    text = (os.environ if env is None else env).get(PASS_ENV, "").strip()
    if not text:
        return PASS_S, None
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not PASS_MIN_S <= v <= PASS_MAX_S:  # nan fails too
        return PASS_S, (
            f"{PASS_ENV}={text[:20]!r} is not a number of seconds from {PASS_MIN_S:g} to "
            f"{PASS_MAX_S:g}: {PASS_S:g} s used"
        )
    return v, None


def _na(e: BaseException) -> str:
    return "n/a: " + ((str(e) or type(e).__name__).removeprefix("NVMLError_"))


class _Lost(Exception):
    pass


class NvLinkReader:
    """Reads one GPU's NVLink counters per slot in a thread; `take()` hands the reads over.

    A read is `{"gpu": i, "t": time, "links": [[replay, recovery, crc_flit, crc_data] or
    None (link down), ...]}`, with `"na": {what: why}` the first time something is n/a.
    """

    def __init__(
        self,
        nv: Any,
        devices: Sequence[Any],
        *,
        timeout: float,
        pass_s: float = PASS_S,
    ) -> None:
        self._nv = nv
        self._devices = list(devices)
        self._timeout = timeout
        self.pass_s = pass_s
        self._nvml = side_thread("gputui-nvlink")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._thread: threading.Thread | None = None
        self._skip: dict[int, set[str]] = {}  # GPU -> counters n/a there
        self._out: set[int] = set()  # GPUs left out: no NVLink, lost, nothing to read
        self.note: str | None = None
        self.reads = 0  # (counter, link) reads made, for tests and the benchmark
        self.gpu_reads = 0

    def start(self) -> None:
        if self._thread is not None or not self._devices:
            return
        self._thread = threading.Thread(target=self._loop, name="gputui-nvlink", daemon=True)
        self._thread.start()

    def _due(self) -> list[Any]:
        return [
            d
            for d in self._devices
            if d.index not in self._out and d.handle is not None and not d.unreadable
        ]

    def _loop(self) -> None:
        turn = 0
        while not self._stop.is_set():
            due = self._due()
            if not due:
                return  # no GPU has NVLink counters to read
            d = due[turn % len(due)]
            turn += 1
            started = time.monotonic()
            try:
                row = self._nvml.run(
                    self._read_gpu,
                    d,
                    timeout=self._timeout,
                    what=f"reading NVLink error counters of GPU {d.index}",
                )
            except NvmlHung as e:
                self.note = f"NVLink counters: {e}"
                return  # the driver did not answer: nothing more is asked of it
            except Exception as e:  # a bug or an odd binding: said once, this GPU left out
                self.note = f"NVLink counters of GPU {d.index} could not be read ({e})"
                self._out.add(d.index)
                continue
            if row is not None:
                with self._lock:
                    self._pending.append(row)
                    del self._pending[:-MAX_PENDING]
            slot = self.pass_s / max(1, len(self._due()))
            self._stop.wait(max(0.0, slot - (time.monotonic() - started)))

    def _read_gpu(self, d: Any) -> dict[str, Any] | None:
        """In the side thread: one GPU's link states and error counters."""
        nv, th = self._nv, self._nvml
        skip = self._skip.setdefault(d.index, set())
        na: dict[str, str] = {}
        links: list[list[int | None] | None] = []
        gone = (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound)
        try:
            for link in range(NVLINK_MAX):
                if self._stop.is_set():
                    return None  # closing: a part of a read is no read
                th.current = (nv.nvmlDeviceGetNvLinkState, d.index)
                try:
                    up = nv.nvmlDeviceGetNvLinkState(d.handle, link)
                except nv.NVMLError_GpuIsLost:
                    raise _Lost from None
                except nv.NVMLError as e:
                    if link == 0:  # no NVLink on this GPU: never asked again
                        self._out.add(d.index)
                        return {
                            "gpu": d.index,
                            "t": round(time.time(), 3),
                            "na": {"nvlink": _na(e)},
                        }
                    break  # the link past the last one answers "invalid argument"
                if not up:
                    links.append(None)
                    continue
                values: list[int | None] = []
                for name, counter in COUNTERS:
                    if name in skip:
                        values.append(None)
                        continue
                    th.current = (nv.nvmlDeviceGetNvLinkErrorCounter, d.index)
                    self.reads += 1
                    try:
                        values.append(
                            int(nv.nvmlDeviceGetNvLinkErrorCounter(d.handle, link, counter))
                        )
                    except nv.NVMLError_GpuIsLost:
                        raise _Lost from None
                    except (*gone, nv.NVMLError_InvalidArgument) as e:
                        skip.add(name)  # n/a on this GPU: said once, not asked again
                        na[name] = _na(e)
                        values.append(None)
                    except nv.NVMLError:
                        values.append(None)  # one odd answer: asked again next pass
                links.append(values)
        except _Lost:
            d.unreadable = "GPU is lost"  # the sampler stops asking it too
            self._out.add(d.index)
            return None
        if len(skip) == len(COUNTERS):
            self._out.add(d.index)  # every counter n/a: nothing to read next pass
        self.gpu_reads += 1
        row: dict[str, Any] = {"gpu": d.index, "t": round(time.time(), 3), "links": links}
        if na:
            row["na"] = na
        return row

    def take(self) -> list[dict[str, Any]]:
        """The reads finished since the last call, oldest first."""
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def stop(self) -> None:
        """Ask the thread to end (a read in progress stops at its next link)."""
        self._stop.set()

    def close(self) -> bool:
        """Stop, and wait a little for a read in progress. False when the side thread is
        still inside NVML: NVML must then not be shut down."""
        self._stop.set()
        th = self._thread
        if th is not None:
            th.join(JOIN_S)
        stuck = self._nvml.stuck()
        if not stuck:
            self._nvml.end()
        return not stuck

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
