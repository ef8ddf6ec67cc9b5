"""Where a dashboard's memory at rest goes, part by part, on a GPU node (issue 44 item 7).

Each part runs in a fresh interpreter (its .pyc compiled first) and prints its peak RSS
(VmHWM) and threads: bare Python; NVML initialised and every reading gputui takes read once;
the Xid event set registered on every GPU; NVLink counters read; Textual's app imported;
gputui's dashboard module imported; gputui's live source sampled 10 times (no screen); and
nvitop's modules with the same reads. Run on the device:
    python3 scripts/device/rest_parts.py > $OUT/rest_parts.txt
"""

from __future__ import annotations

import subprocess
import sys

HWM = """
import os
st = open("/proc/self/status").read()
hwm = int(st.split("VmHWM:")[1].split()[0]) / 1024
rss = int(st.split("VmRSS:")[1].split()[0]) / 1024
print(f"{hwm:7.1f} MiB peak  {rss:7.1f} MiB now  {len(os.listdir('/proc/self/task'))} threads")
"""
READS = """
import pynvml as n
n.nvmlInit()
hs = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
for h in hs:
    for f in (n.nvmlDeviceGetUtilizationRates, n.nvmlDeviceGetPowerUsage, n.nvmlDeviceGetMemoryInfo,
              n.nvmlDeviceGetComputeRunningProcesses, n.nvmlDeviceGetEnforcedPowerLimit,
              n.nvmlDeviceGetPerformanceState, n.nvmlDeviceGetName, n.nvmlDeviceGetUUID):
        try: f(h)
        except Exception: pass
    for f, arg in ((n.nvmlDeviceGetTemperature, 0), (n.nvmlDeviceGetClockInfo, 1),
                   (n.nvmlDeviceGetClockInfo, 2)):
        try: f(h, arg)
        except Exception: pass
"""
XID = """
es = n.nvmlEventSetCreate()
for h in hs:
    try: n.nvmlDeviceRegisterEvents(h, n.nvmlEventTypeXidCriticalError, es)
    except Exception as e: print("register:", e)
try: n.nvmlEventSetWait_v2(es, 10)
except Exception: pass
"""
NVLINK = """
for h in hs:
    try: n.nvmlDeviceGetFieldValues(h, [n.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL])
    except Exception as e: print("fields:", e)
"""
PARTS = {
    "bare python": "",
    "nvml + reads": READS,
    "nvml + reads + xid event set": READS + XID,
    "nvml + reads + xid + nvlink": READS + XID + NVLINK,
    "textual.app": "import textual.app",
    "gputui.ui.app (the dashboard's modules)": "import gputui.ui.app",
    "textual + nvml reads + xid": "import textual.app\n" + READS + XID,
    "gputui live source, 10 samples": (
        "import time\nfrom gputui.collect.live import LiveSource\ns = LiveSource(interval=0.2)\n"
        "for _ in range(10):\n    s.sample(); time.sleep(0.2)\n"
    ),
    "gputui live source + gputui.ui.app": (
        "import time, gputui.ui.app\nfrom gputui.collect.live import LiveSource\n"
        "s = LiveSource(interval=0.2)\nfor _ in range(10):\n    s.sample(); time.sleep(0.2)\n"
    ),
    "nvitop modules + reads": "import nvitop.tui, nvitop.api\n" + READS,
}
for name, code in PARTS.items():
    r = subprocess.run(  # noqa: S603 (our own snippets, this interpreter)
        [sys.executable, "-c", code + HWM], capture_output=True, text=True, timeout=120
    )
    out = (r.stdout.strip().splitlines() or ["-"])[-1]
    err = r.stderr.strip().splitlines()[-1:] if r.returncode else []
    print(f"{name:45s} {out} {' '.join(err)}")
