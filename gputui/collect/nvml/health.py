"""GPU health, read: NVML's Xid events, the kernel log's Xid lines, and health counters.

`HealthMonitor.poll()` is called by the sampling thread (never the UI's) once per sample and
returns `{"type": "health", ...}` records for `Snapshot.records`: the record is the evidence,
so `gputui record` writes it and a replay hands it back at its time (gputui.diagnose.health.judge
reads it the same way live and in replay). A record is made only when something is new: an
Xid, counters that changed (or a heartbeat every HEARTBEAT_S), a note.

- Counters (ECC, row remaps, retired pages, PCIe replays, NVLink links up and down) are read
  at the first poll and then every COUNTER_EVERY_S (at once after an ECC event), never every
  sample, in one unit of the NVML thread with its deadline: microseconds each. Each read that
  is not supported (NotSupported, FunctionNotFound, no NVLink in a VM) is "n/a" with its
  reason, never an error and never bad health. A GPU that answers GPU_IS_LOST is recorded
  `lost` and not asked again. Links up and down (18 calls a GPU, most of the counter reads)
  are asked every LINKS_EVERY_S and at once after any Xid or ECC event (a link that fails
  raises an Xid); between two asks each read carries the last answer. No verdict reads them:
  they are shown and recorded, and the first read picks the GPUs whose error counters count.
- NVLink error counters cost the driver ~0.8 ms of CPU per (counter, link): they are read
  by gputui.collect.nvml.nvlink on a thread of its own, one GPU per slot, a pass in 5
  minutes, starting at the second poll (after the first sample is out), and each poll hands
  the reads finished since into the record (`nvlink`: per link values with the time of each
  read), from which gputui.diagnose.health.link_rates makes rates. `nvlink=False`
  (snapshot, dump, bundle): never read.
- The kernel log (/dev/kmsg) is read without blocking at every poll; only Xid lines and a GPU
  fallen off the bus are kept. Lines written before gputui started count when they are at
  most WINDOW_S old (the record carries `started`, so each is shown with its age). Where the
  log cannot be read, a note says so once and NVML's events go on alone.
"""

from __future__ import annotations

import time
from typing import Any

from gputui.collect.kernlog import KernelLog
from gputui.collect.nvml.health_events import XidEvents
from gputui.collect.nvml.nvlink import COUNTERS, NvLinkReader, pass_seconds
from gputui.collect.nvml.thread import NvmlHung
from gputui.collect.nvml.xid import XidEvent, pci_key, xid_events
from gputui.collect.pacing import lasted

COUNTER_EVERY_S = 5.0
LINKS_EVERY_S = 15.0  # links up and down: asked this often (and after any event)
HEARTBEAT_S = 60.0  # counters are written again after this long even when unchanged
WINDOW_S = 3600.0  # kernel-log Xids from before gputui started count this far back
MAX_EVENTS_PER_RECORD = 200
NVLINK_MAX = 18  # links asked per GPU (H100: 18); the first link that is not there ends it


def _na(e: BaseException) -> str:
    return "n/a: " + ((str(e) or type(e).__name__).removeprefix("NVMLError_"))


class _Lost(Exception):
    pass


def read_counters(
    nv: Any, devices: list[Any], thread: Any, links_from: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """In the NVML thread: {gpu index: {field: value, ..., "na": {field: why}}}.

    Args:
        links_from: the rows of an earlier read whose links up and down are carried into
            this one instead of asked again; None asks them.
    """
    out: dict[str, dict[str, Any]] = {}
    for d in devices:
        if d.handle is None or d.unreadable is not None:
            lost = d.unreadable is not None and "lost" in d.unreadable.lower()
            out[str(d.index)] = {"lost": lost, "na": {"gpu": d.unreadable or "no handle"}}
            continue
        try:
            last = None if links_from is None else links_from.get(str(d.index))
            out[str(d.index)] = _read_one(nv, d, thread, last)
        except _Lost:
            d.unreadable = "GPU is lost"  # the sampler stops asking it too
            out[str(d.index)] = {"lost": True, "na": {"gpu": "GPU is lost"}}
    return out


def _read_one(nv: Any, d: Any, thread: Any, last: dict[str, Any] | None) -> dict[str, Any]:
    """One GPU's counters; _Lost when it answers GPU_IS_LOST. `last`: its row of an earlier
    read, whose links are carried instead of asked (None: ask them)."""
    row: dict[str, Any] = {"lost": False}
    na: dict[str, str] = {}

    def q(field: str, fn: Any, *args: Any) -> Any:
        thread.current = (fn, d.index)
        try:
            return fn(d.handle, *args)
        except nv.NVMLError_GpuIsLost:
            raise _Lost from None
        except nv.NVMLError as e:
            na[field] = _na(e)
            return None

    # uncorrected (1) errors, volatile (0: since the driver loaded) and aggregate (1)
    row["ecc_uncorrected_volatile"] = q(
        "ecc_uncorrected_volatile", nv.nvmlDeviceGetTotalEccErrors, 1, 0
    )
    row["ecc_uncorrected_aggregate"] = q(
        "ecc_uncorrected_aggregate", nv.nvmlDeviceGetTotalEccErrors, 1, 1
    )
    rows = q("remap", nv.nvmlDeviceGetRemappedRows)
    if rows is not None:
        c, u, p, f = rows
        row.update(remap_corr=c, remap_uncorr=u, remap_pending=bool(p), remap_failure=bool(f))
    row["retired_pending"] = q("retired_pending", nv.nvmlDeviceGetRetiredPagesPendingStatus)
    row["pcie_replay"] = q("pcie_replay", nv.nvmlDeviceGetPcieReplayCounter)
    if last is None:
        row.update(_nvlink(nv, q, na))
    else:
        row.update({k: last[k] for k in ("nvlink_up", "nvlink_down") if k in last})
        if "nvlink" in last.get("na", {}):
            na["nvlink"] = last["na"]["nvlink"]
    row = {k: v for k, v in row.items() if v is not None}
    if na:
        row["na"] = na
    return row


def _nvlink(nv: Any, q: Any, na: dict[str, str]) -> dict[str, Any]:
    """Links up and down (microseconds each). Their error counters cost ~0.8 ms a read and
    are read apart, rarely (gputui.collect.nvml.nvlink)."""
    up = down = 0
    for link in range(NVLINK_MAX):
        state = q("nvlink", nv.nvmlDeviceGetNvLinkState, link)
        if state is None:
            break
        if state:
            up += 1
        else:
            down += 1
    if up + down == 0:
        return {}
    na.pop("nvlink", None)  # the link past the last one answers "invalid argument"
    return {"nvlink_up": up, "nvlink_down": down}


class HealthMonitor:
    """The health readers of a live source: events, kernel log, counters. Never raises."""

    def __init__(
        self,
        reader: Any,
        *,
        kernel_log: KernelLog | None = None,
        events: bool = True,
        nvlink: bool = True,
        now: float | None = None,
    ) -> None:
        self.reader = reader
        self.started = time.time() if now is None else now
        self.kernel_log = kernel_log if kernel_log is not None else KernelLog()
        self.pci: dict[str, int] = {}
        self.notes: list[str] = []
        self._said: set[str] = set()
        self._last_counters: dict[str, Any] | None = None
        self._counters_at = -1e18
        self._links_at = -1e18
        self._written_at = -1e18
        self._events: XidEvents | None = None
        self._want_events = events
        self._first = True
        self.counter_reads = 0
        self._want_nvlink = nvlink
        self.nvlink: NvLinkReader | None = None  # made at the second poll (see _start_nvlink)

    def _open(self) -> None:
        """At the first poll (after the first sample: a hang names the sample's call)."""
        nv, devices = getattr(self.reader, "_nv", None), list(getattr(self.reader, "devices", []))
        if nv is None or not devices:
            return
        try:
            self.pci = self.reader._thread.run(
                self._pci_map, nv, devices, timeout=self.reader.timeout, what="nvmlDeviceGetPciInfo"
            )
        except Exception:  # noqa: S110 - without the map, kernel lines keep their PCI address
            pass
        if self._want_events:
            handles = {
                d.index: d.handle for d in devices if d.handle is not None and not d.unreadable
            }
            self._events = XidEvents(
                nv, handles, thread=self.reader._thread, timeout=self.reader.timeout
            )
            self._events.start()
            if self._events.note:
                self._note(self._events.note)

    @staticmethod
    def _pci_map(nv: Any, devices: list[Any]) -> dict[str, int]:
        out = {}
        for d in devices:
            if d.handle is None or d.unreadable:
                continue
            try:
                p = nv.nvmlDeviceGetPciInfo(d.handle)
            except nv.NVMLError:
                continue
            key = pci_key(f"{int(p.domain):x}:{int(p.bus):02x}:{int(p.device):02x}")
            if key:
                out[key] = d.index
        return out

    def _note(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            self.notes.append(text)

    def poll(self, now: float | None = None) -> list[dict[str, Any]]:
        """New health records (zero or one) for the sample at `now`."""
        now = time.time() if now is None else now
        if self._first:
            self._open()
        events: list[XidEvent] = []
        lines = self.kernel_log.poll()
        if self.kernel_log.error:
            self._note(self.kernel_log.error)
        horizon = self.started - WINDOW_S
        events += [e for e in xid_events(lines, self.pci) if e.t >= horizon]
        if self._events is not None:
            events += self._events.take()
            if self._events.note:
                self._note(self._events.note)
        if not self._first and self.nvlink is None and self._want_nvlink:
            self._start_nvlink()  # the first sample is out: its answer never waited for this
        counters = None
        ecc = self._events is not None and self._events.ecc_seen.is_set()
        if self._first or ecc or lasted(now - self._counters_at, COUNTER_EVERY_S):
            if self._events is not None:
                self._events.ecc_seen.clear()
            self._counters_at = now
            links = bool(self._last_counters is None or ecc or events)
            links = links or lasted(now - self._links_at, LINKS_EVERY_S)
            counters = self._read_counters(None if links else self._last_counters)
            if counters is not None and links:
                self._links_at = now
        self._first = False
        rec: dict[str, Any] = {
            "type": "health",
            "t": round(now, 3),
            "started": round(self.started, 3),
        }
        if counters is not None and (
            counters != self._last_counters or now - self._written_at >= HEARTBEAT_S
        ):
            rec["counters"] = counters
            self._last_counters, self._written_at = counters, now
        if events:
            rec["events"] = [e.to_json() for e in events[-MAX_EVENTS_PER_RECORD:]]
        if self.nvlink is not None:
            if reads := self.nvlink.take():
                rec["nvlink"] = {
                    "pass_s": self.nvlink.pass_s,
                    "counters": [name for name, _ in COUNTERS],
                    "reads": reads,
                }
            if self.nvlink.note:
                self._note(self.nvlink.note)
        if self.notes:
            rec["notes"], self.notes = self.notes, []
        return [rec] if len(rec) > 3 else []

    def _start_nvlink(self) -> None:
        """The NVLink counter thread, for the GPUs the first counter read found links on."""
        self._want_nvlink = False
        nv, devices = getattr(self.reader, "_nv", None), list(getattr(self.reader, "devices", []))
        if nv is None or getattr(self.reader, "status", "ok") == "hung":
            return
        rows = self._last_counters or {}
        with_links = [d for d in devices if (rows.get(str(d.index)) or {}).get("nvlink_up", 0) > 0]
        if not with_links:
            return  # no link up anywhere (a VM, PCIe cards): no thread at all
        pass_s, note = pass_seconds()
        if note:
            self._note(note)
        self.nvlink = NvLinkReader(nv, with_links, timeout=self.reader.timeout, pass_s=pass_s)
        self.nvlink.start()

    def _read_counters(self, links_from: dict[str, Any] | None) -> dict[str, Any] | None:
        nv, devices = getattr(self.reader, "_nv", None), list(getattr(self.reader, "devices", []))
        if nv is None or not devices or getattr(self.reader, "status", "ok") == "hung":
            return None
        self.counter_reads += 1
        try:
            return self.reader._thread.run(  # type: ignore[no-any-return]
                read_counters,
                nv,
                devices,
                self.reader._thread,
                links_from,
                timeout=self.reader.timeout,
                what="reading health counters",
            )
        except NvmlHung as e:
            self.reader.status, self.reader.error = "hung", str(e)
            self._note(str(e))
        except Exception as e:  # a bug or an odd binding: said once, the rest goes on
            self._note(f"health counters could not be read ({e})")
        return None

    def stop(self) -> None:
        """Ask the Xid and NVLink threads to end, without waiting (a process about to exit)."""
        if self._events is not None:
            self._events.stop()
        if self.nvlink is not None:
            self.nvlink.stop()

    def close(self) -> bool:
        """Stop the Xid and NVLink threads and close the log. False when a thread is still
        inside NVML after its wait should have ended: NVML must then not be shut down."""
        ended = True
        if self.nvlink is not None:
            ended = self.nvlink.close()
        if self._events is not None:
            self._events.close()
            ended = ended and not self._events.alive
        self.kernel_log.close()
        return ended
