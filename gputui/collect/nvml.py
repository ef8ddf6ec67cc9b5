"""GPU readings through NVML (nvidia-ml-py's `pynvml` module).

Every query goes through `_q`, which turns an NVMLError into None plus a reason, so one
unsupported field (a consumer card without power readings, a MIG slice) never hides the rest.
Only the cheap calls run here (each ~1-8 us on an H200); process utilization (~2.4 ms per GPU)
and PCIe throughput (~21 ms, it blocks for a 20 ms sample) are deliberately not read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputui.collect.model import GpuSample

NO_DRIVER_HINT = "run `gputui --demo` to see a recorded NCCL hang on 2 x H200"


@dataclass
class _Device:
    index: int
    handle: Any
    name: str | None
    uuid: str | None
    mem_total_mb: float | None


def _err_text(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return text.removeprefix("NVMLError_")


class NvmlReader:
    """Opens NVML once and reads all GPUs on each `read()`.

    If NVML cannot start (no driver, no library, no permission), `error` says why in plain
    words and `read()` returns no GPUs: the caller still shows host processes.
    """

    def __init__(self) -> None:
        self.error: str | None = None
        self.driver: str | None = None
        self.devices: list[_Device] = []
        self._nv: Any = None
        self._mem_v2 = True
        try:
            import pynvml
        except ImportError:
            self.error = (
                f"nvidia-ml-py is not installed (pip install nvidia-ml-py); {NO_DRIVER_HINT}"
            )
            return
        self._nv = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            self.error = self._init_error(e)
            return
        except OSError as e:  # a broken libnvidia-ml.so
            self.error = f"could not load NVML ({e}); {NO_DRIVER_HINT}"
            return
        self.driver = self._call(pynvml.nvmlSystemGetDriverVersion)
        count = self._call(pynvml.nvmlDeviceGetCount) or 0
        for i in range(count):
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
            except pynvml.NVMLError:
                continue  # shown as missing rather than failing the others
            mem = self._call(pynvml.nvmlDeviceGetMemoryInfo, h)
            self.devices.append(
                _Device(
                    index=i,
                    handle=h,
                    name=self._call(pynvml.nvmlDeviceGetName, h),
                    uuid=self._call(pynvml.nvmlDeviceGetUUID, h),
                    mem_total_mb=mem.total / 2**20 if mem is not None else None,
                )
            )
        if count == 0:
            self.error = f"the NVIDIA driver reports no GPUs on this node; {NO_DRIVER_HINT}"

    def _init_error(self, e: BaseException) -> str:
        nv = self._nv
        if isinstance(e, (nv.NVMLError_LibraryNotFound, nv.NVMLError_DriverNotLoaded)):
            why = _err_text(e)
            return f"no NVIDIA driver found (NVML: {why}), so no GPUs to show; {NO_DRIVER_HINT}"
        if isinstance(e, nv.NVMLError_NoPermission):
            return f"no permission to open NVML (check /dev/nvidia* access); {NO_DRIVER_HINT}"
        return f"NVML did not start ({_err_text(e)}); {NO_DRIVER_HINT}"

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            v = fn(*args)
        except self._nv.NVMLError:
            return None
        return v.decode() if isinstance(v, bytes) else v

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

    def read(self) -> list[GpuSample]:
        return [self._read_one(d) for d in self.devices]

    def _read_one(self, d: _Device) -> GpuSample:
        nv, h = self._nv, d.handle
        na: dict[str, str] = {}

        def q(field: str, fn: Callable[..., Any], *args: Any) -> Any:
            try:
                return fn(h, *args)
            except nv.NVMLError as e:
                na[field] = _err_text(e)
                return None

        util = q("util", nv.nvmlDeviceGetUtilizationRates)
        power = q("power_w", nv.nvmlDeviceGetPowerUsage)
        limit = q("power_limit_w", nv.nvmlDeviceGetEnforcedPowerLimit)
        mem = q("mem_used_mb", self._memory_info)
        events_fn = (
            getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        )
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
            temp_c=q("temp_c", nv.nvmlDeviceGetTemperature, nv.NVML_TEMPERATURE_GPU),
            sm_mhz=q("sm_mhz", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM),
            mem_mhz=q("mem_mhz", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_MEM),
            pstate=q("pstate", nv.nvmlDeviceGetPerformanceState),
            events=q("events", events_fn),
            pids=tuple(pid for pid, _ in proc_mem),
            proc_mem_mb=proc_mem,
            na=na,
        )

    def close(self) -> None:
        if self._nv is not None and self.error is None:
            try:
                self._nv.nvmlShutdown()
            except self._nv.NVMLError:
                pass
