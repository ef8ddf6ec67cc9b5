"""NVML's readings printed as `dcgmi dmon` prints its table, for a node without DCGM.

Why: scripts/device/check_dcgmi.sh reads a real hang's `dcgmi dmon` log back with
`gputui check --replay`. Where DCGM is not installed (no `dcgmi`, no nv-hostengine), this
writes the same table from NVML (nvidia-ml-py) so that the rest of the check still runs on
the hang's real readings; the check's summary says which wrote the file. The layout is DCGM
3's DeviceMonitor: `#Entity` padded to 16, each field's short name and value padded to its
width + 8 (GPUTL, MCUTL, POWER, PMLMT, FBUSD 10 wide; TMPTR, SMCLK, MMCLK 5), a units line,
the header again every 14 samples, doubles with 3 decimals, `N/A` for what NVML cannot read.

    python3 scripts/device/dmon_text.py -d 500 -c 120 >> gpu.log
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable

import pynvml

FIELDS = (("GPUTL", 10, ""), ("MCUTL", 10, ""), ("POWER", 10, "W"), ("PMLMT", 10, "W"),
          ("FBUSD", 10, ""), ("TMPTR", 5, "C"), ("SMCLK", 5, ""), ("MMCLK", 5, ""))  # fmt: skip


def _line(first: str, cells: list[str]) -> str:
    return f"{first:<16}" + "".join(
        f"{c:<{w + 8}}" for c, (_n, w, _u) in zip(cells, FIELDS, strict=True)
    )


def _read(h: object) -> list[str]:
    def get(f: Callable[[], object], fmt: str = "{}") -> str:
        """The reading, or N/A where NVML cannot read it."""
        try:
            return fmt.format(f())
        except pynvml.NVMLError:
            return "N/A"

    util = get(lambda: pynvml.nvmlDeviceGetUtilizationRates(h).gpu)
    mem = get(lambda: pynvml.nvmlDeviceGetUtilizationRates(h).memory)
    return [
        util,
        mem,
        get(lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1000, "{:.3f}"),
        get(lambda: pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000, "{:.3f}"),
        get(lambda: pynvml.nvmlDeviceGetMemoryInfo(h).used >> 20),
        get(lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
        get(lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
        get(lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-d", type=int, default=1000, help="ms between samples (dmon's -d)")
    ap.add_argument("-c", type=int, default=0, help="samples, 0 for ever (dmon's -c)")
    args = ap.parse_args()
    for sig in (signal.SIGINT, signal.SIGTERM):  # a background job starts with SIGINT ignored
        signal.signal(sig, signal.default_int_handler)
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    k = 0
    try:
        while args.c == 0 or k < args.c:
            if k % 14 == 0:
                print(_line("#Entity", [n for n, _w, _u in FIELDS]))
                print(_line("ID", [u for _n, _w, u in FIELDS]))
            for i, h in enumerate(handles):
                print(_line(f"GPU {i}", _read(h)))
            sys.stdout.flush()
            k += 1
            time.sleep(args.d / 1000)  # as dmon: read, print, then sleep -d
    except KeyboardInterrupt:
        print("\n\ndmon was stopped due to receiving a signal", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
