"""Which NVML call costs a dashboard its memory, step by step, on a GPU node (issue 44 item 7).

One interpreter: RSS (and its peak) after importing pynvml, after nvmlInit, after the
handles, then after the first call of each function gputui makes on every GPU, in the
order the live source makes them; then the same readings again (steady: nothing new should
grow); then the readings from a second and a third thread (a thread that calls into the
driver may get a malloc arena of its own: gputui calls NVML from its NVML thread, its Xid
thread and its NVLink thread; nvitop from one). With `--arena-max N`, mallopt(M_ARENA_MAX,
N) is set before the first thread. Run on the device:
    python3 scripts/device/rest_nvml_steps.py [--arena-max 2] > $OUT/rest_nvml_steps.txt
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable
from typing import Any


def rss() -> tuple[float, float]:
    st = open("/proc/self/status").read()
    hwm = int(st.split("VmHWM:")[1].split()[0]) / 1024
    now = int(st.split("VmRSS:")[1].split()[0]) / 1024
    return now, hwm


last = rss()[0]


def step(name: str) -> None:
    global last
    now, hwm = rss()
    print(f"{name:58s} {now:7.1f} MiB (+{now - last:5.1f})  peak {hwm:7.1f}", flush=True)
    last = now


if "--arena-max" in sys.argv:
    n = int(sys.argv[sys.argv.index("--arena-max") + 1])
    libc = ctypes.CDLL("libc.so.6")
    print(f"mallopt(M_ARENA_MAX, {n}) -> {libc.mallopt(-8, n)}")
step("bare python")
import pynvml as nv  # noqa: E402

step("import pynvml")
nv.nvmlInit()
step("nvmlInit")
handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
step(f"handles ({len(handles)} GPUs)")

CRC_TOTAL = nv.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL
CALLS: list[tuple[str, Callable[[Any], Any]]] = [
    ("GetName", nv.nvmlDeviceGetName),
    ("GetUUID", nv.nvmlDeviceGetUUID),
    ("GetPciInfo", nv.nvmlDeviceGetPciInfo),
    ("GetUtilizationRates", nv.nvmlDeviceGetUtilizationRates),
    ("GetPowerUsage", nv.nvmlDeviceGetPowerUsage),
    ("GetEnforcedPowerLimit", nv.nvmlDeviceGetEnforcedPowerLimit),
    ("GetMemoryInfo", nv.nvmlDeviceGetMemoryInfo),
    ("GetMemoryInfo v2", lambda h: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)),
    ("GetTemperature", lambda h: nv.nvmlDeviceGetTemperature(h, 0)),
    ("GetClockInfo SM", lambda h: nv.nvmlDeviceGetClockInfo(h, 1)),
    ("GetClockInfo MEM", lambda h: nv.nvmlDeviceGetClockInfo(h, 2)),
    ("GetPerformanceState", nv.nvmlDeviceGetPerformanceState),
    ("GetCurrentClocksEventReasons", nv.nvmlDeviceGetCurrentClocksEventReasons),
    ("GetComputeRunningProcesses", nv.nvmlDeviceGetComputeRunningProcesses),
    ("GetTotalEccErrors", lambda h: nv.nvmlDeviceGetTotalEccErrors(h, 1, 1)),
    ("GetRemappedRows", nv.nvmlDeviceGetRemappedRows),
    ("GetRetiredPagesPendingStatus", nv.nvmlDeviceGetRetiredPagesPendingStatus),
    ("GetPcieReplayCounter", nv.nvmlDeviceGetPcieReplayCounter),
    ("GetNvLinkState x18", lambda h: [nv.nvmlDeviceGetNvLinkState(h, k) for k in range(18)]),
    (
        "GetNvLinkErrorCounter x18",
        lambda h: [nv.nvmlDeviceGetNvLinkErrorCounter(h, k, 0) for k in range(18)],
    ),
    (
        "GetFieldValues (NVLink CRC)",
        lambda h: nv.nvmlDeviceGetFieldValues(h, [CRC_TOTAL]),
    ),
    ("GetSupportedEventTypes", nv.nvmlDeviceGetSupportedEventTypes),
]


def read_all(label: str = "", quiet: bool = False) -> None:
    for name, f in CALLS:
        for h in handles:
            try:
                f(h)
            except Exception as e:  # noqa: BLE001 - a call the GPU does not support
                if not quiet and h is handles[0]:
                    print(f"   {name}: {type(e).__name__}: {e}")
        if not quiet:
            step(f"{label}{name}")


read_all()
es = nv.nvmlEventSetCreate()
for h in handles:
    try:
        nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, es)
    except Exception as e:  # noqa: BLE001
        print(f"   RegisterEvents: {e}")
step("event set, Xid registered on every GPU")
for _ in range(10):
    read_all(quiet=True)
step("every reading 10 times more (steady)")


def in_thread(name: str) -> None:
    t = threading.Thread(target=read_all, kwargs={"quiet": True}, name=name)
    t.start()
    t.join()
    step(f"every reading from a new thread ({name})")


in_thread("second")
in_thread("third")


def waiter() -> None:
    try:
        nv.nvmlEventSetWait_v2(es, 200)
    except Exception:  # noqa: BLE001 - a timeout
        pass


t = threading.Thread(target=waiter)
t.start()
t.join()
step("an event wait from a thread (as the Xid thread)")
nv.nvmlShutdown()
step("nvmlShutdown")
