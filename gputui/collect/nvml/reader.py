"""GPU readings through NVML (nvidia-ml-py's `pynvml` module), every call bounded.

All NVML work runs in the process's NVML thread (nvml_thread.py) with a deadline: opening
the library and listing the GPUs is one unit, reading every GPU once is another. A unit that
overstays marks the library hung: the reader reports it (status HUNG, a one-line `error`)
and never touches NVML again, not even nvmlShutdown.

Inside a unit, one unsupported field (a consumer card without power readings, a MIG slice)
becomes None plus a reason in `GpuSample.na` and never hides the rest. A GPU that NVML
reports lost (fallen off the bus), or whose handle cannot be had, is still listed: every
reading None and `na["gpu"]` saying why, so a caller cannot mistake it for a quiet GPU.
Only the cheap calls run here (each ~1-8 us on an H200); process utilization (~2.4 ms per
GPU) and PCIe throughput (~21 ms, it blocks for a 20 ms sample) are deliberately not read.
A reading that does not move at rest (the enforced power limit) is asked every
HELD_FOR_S, not every sample, as nvitop caches its static readings: each NVML call is a
trip into the driver, and at rest the NVML thread is the dashboard's second cost after the
UI thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputui.collect.model import GpuSample
from gputui.collect.nvml.driver import driver_evidence
from gputui.collect.nvml.thread import NvmlHung, NvmlThread, nvml_thread
from gputui.collect.pacing import lasted

NO_DRIVER_HINT = "run `gputui --demo` to see a recorded NCCL hang on 2 x H200"
# NVML start, each read of every GPU, and nvmlShutdown. Not shorter for shutdown: on a node
# without persistence mode, the last client's shutdown tears the GPUs' state down, which
# takes time on a healthy node, and a false "did not answer" would fail a health check.
DEFAULT_TIMEOUT_S = 10.0
GPU_UNREADABLE = "gpu"  # key in GpuSample.na: why the whole GPU cannot be read
# How long the enforced power limit is held between reads. Changing it takes an
# administrator (`nvidia-smi -pl`) or the board's power brake; a new limit is shown within
# this, and within half of the 10 s after which a spinning GPU is called stalled (the
# spin signature reads power as a share of the limit), so no verdict waits for it.
HELD_FOR_S = 5.0

# What the reader knows about NVML; `check` turns these into its exit status.
OK = "ok"  # NVML started (it may still report no GPUs, or some GPUs lost)
NO_DRIVER = "no-driver"  # no NVIDIA driver or GPU on this node: nothing to watch
FAILING = "failing"  # a driver or GPU is here, but NVML fails
HUNG = "hung"  # an NVML call did not return in time


class _Lost(Exception):
    """Raised inside a GPU's read when NVML says the GPU is lost: stop asking it."""


@dataclass
class _Device:
    index: int
    handle: Any
    name: str | None = None
    uuid: str | None = None
    mem_total_mb: float | None = None
    unreadable: str | None = None  # why no reading can be had (e.g. "GPU is lost")
    # field -> (monotonic time read, value, NVML's reason when it gave none): HELD_FOR_S
    held: dict[str, tuple[float, Any, str | None]] = field(default_factory=dict)


@dataclass
class _Opened:
    status: str = OK
    error: str | None = None
    initialized: bool = False
    driver: str | None = None
    devices: list[_Device] = field(default_factory=list)


def _err_text(e: BaseException) -> str:
    """An NVMLError as NVML words it. str() calls nvmlErrorString: NVML thread only."""
    text = str(e) or type(e).__name__
    return text.removeprefix("NVMLError_")


def _text(v: Any) -> Any:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def unreadable_gpus(gpus: Sequence[GpuSample]) -> list[GpuSample]:
    """The GPUs of a sample that gave no reading at all (lost, or no handle)."""
    return [g for g in gpus if GPU_UNREADABLE in g.na]


def unreadable_message(gpus: Sequence[GpuSample]) -> str | None:
    """One line for `Snapshot.gpu_error` when GPUs cannot be read, else None."""
    bad = unreadable_gpus(gpus)
    if not bad:
        return None
    reasons = sorted({g.na[GPU_UNREADABLE] for g in bad})
    which = ", ".join(str(g.index) for g in bad)
    text = f"GPU {which} cannot be read (NVML: {'; '.join(reasons)})"
    if any("lost" in r.lower() for r in reasons):
        text += ": fallen off the bus? see `dmesg` (Xid 79) and nvidia-smi"
    return text


class NvmlReader:
    """Opens NVML once and reads all GPUs on each `read()`, each with a time limit.

    If NVML cannot start (no driver, no library, no permission, no answer), `status` says
    which case it is, `error` says why in plain words, and `read()` returns no GPUs: the
    caller still shows host processes. If a read overstays, `read()` raises NvmlHung, and
    so does every later one.
    """

    def __init__(self, timeout: float = DEFAULT_TIMEOUT_S, thread: NvmlThread | None = None):
        self.timeout = timeout
        self.status = OK
        self.error: str | None = None
        self.driver: str | None = None
        self.devices: list[_Device] = []
        self._thread = thread or nvml_thread()
        self._nv: Any = None
        self._mem_v2 = True
        self._initialized = False
        self._closed = False
        try:
            import pynvml
        except ImportError:
            self._no_library("nvidia-ml-py is not installed (pip install nvidia-ml-py)")
            return
        self._nv = pynvml
        try:
            opened = self._thread.run(self._open, timeout=timeout, what="nvmlInit")
        except NvmlHung as e:
            self.status, self.error = HUNG, str(e)
            return
        self.status, self.error = opened.status, opened.error
        self._initialized, self.driver, self.devices = (
            opened.initialized,
            opened.driver,
            opened.devices,
        )

    def _no_library(self, why: str) -> None:
        evidence = driver_evidence()
        if evidence is None:
            self.status, self.error = NO_DRIVER, f"{why}; {NO_DRIVER_HINT}"
        else:
            self.status, self.error = FAILING, f"{why}, although {evidence}"

    # -- in the NVML thread

    def _at(self, where: str) -> None:
        self._thread.current = where

    def _open(self) -> _Opened:
        nv = self._nv
        out = _Opened()
        self._at("nvmlInit")
        try:
            nv.nvmlInit()
        except nv.NVMLError as e:
            out.status, out.error = self._init_failed(e)
            return out
        except OSError as e:  # a libnvidia-ml.so that does not load
            out.status, out.error = self._classify(f"could not load NVML ({e})", no_driver=True)
            return out
        out.initialized = True
        self._at("nvmlSystemGetDriverVersion")
        out.driver = self._call(nv.nvmlSystemGetDriverVersion)
        self._at("nvmlDeviceGetCount")
        try:
            count = int(nv.nvmlDeviceGetCount())
        except nv.NVMLError as e:
            out.status = FAILING
            out.error = f"NVML started but cannot count the GPUs ({_err_text(e)}); try nvidia-smi"
            return out
        for i in range(count):
            out.devices.append(self._open_device(i))
        if count == 0:
            out.error = f"the NVIDIA driver reports no GPUs on this node; {NO_DRIVER_HINT}"
        return out

    def _open_device(self, i: int) -> _Device:
        nv = self._nv
        self._at(f"nvmlDeviceGetHandleByIndex on GPU {i}")
        try:
            d = _Device(index=i, handle=nv.nvmlDeviceGetHandleByIndex(i))
        except nv.NVMLError as e:
            return _Device(index=i, handle=None, unreadable=_err_text(e))
        try:
            d.name = self._ask(d, "nvmlDeviceGetName", nv.nvmlDeviceGetName)
            d.uuid = self._ask(d, "nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID)
            mem = self._ask(d, "nvmlDeviceGetMemoryInfo", self._memory_info, d.handle)
        except _Lost:
            return d
        d.mem_total_mb = mem.total / 2**20 if mem is not None else None
        return d

    def _ask(self, d: _Device, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """A static query at open: None when unsupported, _Lost when the GPU is lost."""
        nv = self._nv
        self._at(f"{name} on GPU {d.index}")
        try:
            return self._decoded(fn, *(args or (d.handle,)))
        except nv.NVMLError_GpuIsLost as e:
            d.unreadable = _err_text(e)
            raise _Lost from None
        except nv.NVMLError:
            return None

    def _init_failed(self, e: BaseException) -> tuple[str, str]:
        nv = self._nv
        why = _err_text(e)
        if isinstance(e, (nv.NVMLError_LibraryNotFound, nv.NVMLError_DriverNotLoaded)):
            return self._classify(f"NVML: {why}", no_driver=True)
        if isinstance(e, nv.NVMLError_NoPermission):
            return FAILING, "no permission to open NVML (check access to /dev/nvidia*)"
        return FAILING, f"NVML did not start ({why}); try nvidia-smi"

    def _classify(self, why: str, no_driver: bool) -> tuple[str, str]:
        evidence = driver_evidence() if no_driver else None
        if no_driver and evidence is None:
            return NO_DRIVER, f"no NVIDIA driver found ({why}), so no GPUs to show; " + (
                NO_DRIVER_HINT
            )
        where = f", although {evidence}" if evidence else ""
        return FAILING, f"NVML failed ({why}){where}; try nvidia-smi"

    def _decoded(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args), with a name that is not UTF-8 replaced, never raised: pynvml decodes
        strings strictly, and the UnicodeDecodeError still holds the raw bytes."""
        try:
            return _text(fn(*args))
        except UnicodeDecodeError as e:
            return _text(bytes(e.object))

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return self._decoded(fn, *args)
        except self._nv.NVMLError:
            return None

    def _memory_info(self, h: Any) -> Any:
        """Memory info v2 where the driver has it: its `used` excludes driver-reserved memory
        and so matches nvidia-smi (v1 counts ~615 MiB on an idle H200 as used)."""
        nv = self._nv
        if self._mem_v2:
            try:
                return nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
            except (
                nv.NVMLError_FunctionNotFound,
                nv.NVMLError_NotSupported,
                nv.NVMLError_ArgumentVersionMismatch,
                AttributeError,
            ):
                self._mem_v2 = False
        return nv.nvmlDeviceGetMemoryInfo(h)

    def _read_all(self) -> list[GpuSample]:
        return [self._read_one(d) for d in self.devices]

    def _read_one(self, d: _Device) -> GpuSample:
        if d.unreadable is None:
            try:
                return self._read_device(d)
            except _Lost:
                pass
        return GpuSample(
            index=d.index,
            name=d.name,
            uuid=d.uuid,
            mem_total_mb=d.mem_total_mb,
            na={GPU_UNREADABLE: d.unreadable or "unknown"},
        )

    def _read_device(self, d: _Device) -> GpuSample:
        nv, h = self._nv, d.handle
        na: dict[str, str] = {}
        mismatch = getattr(nv, "NVMLLibraryMismatchError", nv.NVMLError)

        thread, i = self._thread, d.index

        def q(field: str, fn: Callable[..., Any], *args: Any, name: str = "") -> Any:
            thread.current = (name or fn, i)  # formatted only if the call hangs
            try:
                return fn(h, *args)
            except nv.NVMLError_GpuIsLost as e:
                d.unreadable = _err_text(e)  # a lost GPU does not come back: stop asking
                raise _Lost from None
            except (nv.NVMLError, mismatch) as e:
                na[field] = _err_text(e)
                return None

        def held(field: str, fn: Callable[..., Any]) -> Any:
            """q(field, fn), asked again only after HELD_FOR_S; its n/a reason held too."""
            now = time.monotonic()
            last = d.held.get(field)
            if last is None or lasted(now - last[0], HELD_FOR_S):
                value = q(field, fn)
                d.held[field] = (now, value, na.get(field))
                return value
            if last[2] is not None:
                na[field] = last[2]
            return last[1]

        util = q("util", nv.nvmlDeviceGetUtilizationRates)
        power = q("power_w", nv.nvmlDeviceGetPowerUsage)
        limit = held("power_limit_w", nv.nvmlDeviceGetEnforcedPowerLimit)
        mem = q("mem_used_mb", self._memory_info, name="nvmlDeviceGetMemoryInfo")
        events_fn = (
            getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        temp = q("temp_c", nv.nvmlDeviceGetTemperature, nv.NVML_TEMPERATURE_GPU)
        sm = q("sm_mhz", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM)
        mem_mhz = q("mem_mhz", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_MEM)
        pstate = q("pstate", nv.nvmlDeviceGetPerformanceState)
        events = q("events", events_fn)
        procs = q("pids", nv.nvmlDeviceGetComputeRunningProcesses) or []
        proc_mem = tuple(
            (int(p.pid), p.usedGpuMemory / 2**20 if isinstance(p.usedGpuMemory, int) else None)
            for p in procs
        )
        if util is None:
            na["mem_util"] = na["util"]
        if mem is None:
            na["mem_total_mb"] = na["mem_used_mb"]
        return GpuSample(
            index=d.index,
            name=d.name,
            uuid=d.uuid,
            util=float(util.gpu) if util is not None else None,
            mem_util=float(util.memory) if util is not None else None,
            power_w=power / 1000.0 if power is not None else None,
            power_limit_w=limit / 1000.0 if limit is not None else None,
            mem_used_mb=mem.used / 2**20 if mem is not None else None,
            mem_total_mb=mem.total / 2**20 if mem is not None else d.mem_total_mb,
            temp_c=temp,
            sm_mhz=sm,
            mem_mhz=mem_mhz,
            pstate=pstate,
            events=events,
            pids=tuple(pid for pid, _ in proc_mem),
            proc_mem_mb=proc_mem,
            na=na,
        )

    def _shutdown(self) -> None:
        self._at("nvmlShutdown")
        try:
            self._nv.nvmlShutdown()
        except self._nv.NVMLError:
            pass

    # -- callers

    def read(self) -> list[GpuSample]:
        """Every GPU once. NvmlHung if NVML does not answer within `timeout` (or did not
        before): the caller reports it; nothing is queued behind a stuck call."""
        if self.status == HUNG:
            raise NvmlHung(self.error or "NVML is hung")
        if not self.devices:
            return []
        try:
            return self._thread.run(self._read_all, timeout=self.timeout, what="reading GPUs")
        except NvmlHung as e:
            self.status, self.error = HUNG, str(e)
            raise

    def leave(self) -> None:
        """Done with NVML, without nvmlShutdown: for a process about to exit, which releases
        NVML anyway. Nothing waits on the driver (the dashboard's `q`, a stop signal)."""
        self._closed = True

    def close(self) -> None:
        """nvmlShutdown, bounded, and only on a library that is not stuck in a call."""
        if self._closed or not self._initialized:
            return
        self._closed = True
        if self.status == HUNG or self._thread.stuck():
            return  # never queue shutdown behind a call that may not return
        try:
            self._thread.run(self._shutdown, timeout=self.timeout, what="nvmlShutdown")
        except NvmlHung as e:
            self.status, self.error = HUNG, str(e)
