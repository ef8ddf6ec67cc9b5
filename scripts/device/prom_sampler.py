"""Sample NVML at 1 Hz and write what dcgm-exporter would have served, as OpenMetrics with
timestamps, for scripts/device/check_prom_history.sh (and `scripts/prom_readback.sh`).

    python3 scripts/device/prom_sampler.py OUT.om SECONDS --pod-prefix hist --namespace lab

Each GPU's series carry dcgm-exporter's names and labels (gpu, UUID, device, modelName,
Hostname, and pod/namespace/container as its kubelet mapping gives them: GPU r is the pod
`PREFIX-worker-r`, rank r's). The file is written at the end, one metric family after the
other, as `promtool tsdb create-blocks-from openmetrics` wants, and gzip-ed when the name
ends in .gz.

GPUTUI_DEVICE_DRYRUN=1: no NVML (a CPU machine): 4 fake H200s, healthy for --onset seconds,
then GPUs 0-2 spin in a collective (util 100, memory 0, ~123 W of 700 W) while GPU 3 is idle
with its context (~120 W): the shape of a real 4-GPU hang, for trying the pipeline only.
"""

from __future__ import annotations

import argparse
import gzip
import os
import socket
import time

FAMILIES = (
    ("DCGM_FI_DEV_GPU_UTIL", "util"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "mem"),
    ("DCGM_FI_DEV_POWER_USAGE", "power"),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "limit"),
    ("DCGM_FI_DEV_FB_USED", "fb_used"),
    ("DCGM_FI_DEV_FB_FREE", "fb_free"),
    ("DCGM_FI_DEV_SM_CLOCK", "sm"),
    ("DCGM_FI_DEV_MEM_CLOCK", "memclk"),
    ("DCGM_FI_DEV_GPU_TEMP", "temp"),
    ("DCGM_FI_DEV_XID_ERRORS", "xid"),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_dbe"),
)


class Nvml:
    def __init__(self) -> None:
        import pynvml

        self.n = pynvml
        pynvml.nvmlInit()
        self.handles = [
            pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
        ]

    def ident(self, i: int) -> tuple[str, str]:
        h = self.handles[i]
        uuid, name = self.n.nvmlDeviceGetUUID(h), self.n.nvmlDeviceGetName(h)
        return (
            uuid.decode() if isinstance(uuid, bytes) else uuid,
            name.decode() if isinstance(name, bytes) else name,
        )

    def read(self, i: int) -> dict[str, float]:
        n, h = self.n, self.handles[i]
        out: dict[str, float] = {}

        def get(key: str, fn) -> None:  # noqa: ANN001
            try:
                out[key] = float(fn())
            except n.NVMLError:
                pass

        rates = None
        try:
            rates = n.nvmlDeviceGetUtilizationRates(h)
        except n.NVMLError:
            pass
        if rates is not None:
            out["util"], out["mem"] = float(rates.gpu), float(rates.memory)
        get("power", lambda: n.nvmlDeviceGetPowerUsage(h) / 1000)
        get("limit", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000)
        try:
            m = n.nvmlDeviceGetMemoryInfo(h)
            out["fb_used"], out["fb_free"] = m.used / 2**20, m.free / 2**20
        except n.NVMLError:
            pass
        get("sm", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))
        get("memclk", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM))
        get("temp", lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))
        get(
            "ecc_dbe",
            lambda: n.nvmlDeviceGetTotalEccErrors(
                h, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_VOLATILE_ECC
            ),
        )
        out["xid"] = 0.0  # dcgm-exporter's last Xid; none is caused here
        return out


class Fake:
    """Dry run: four H200s, a hang after `onset` seconds with GPU 3 the idle one."""

    handles = range(4)

    def __init__(self, onset: float) -> None:
        self.at = time.time() + onset

    def ident(self, i: int) -> tuple[str, str]:
        return f"GPU-00000000-dry0-run0-0000-00000000000{i}", "NVIDIA H200"

    def read(self, i: int) -> dict[str, float]:
        base = {
            "limit": 700.0,
            "fb_used": 9000.0,
            "fb_free": 134000.0,
            "sm": 1980.0,
            "memclk": 3201.0,
            "temp": 40.0,
            "xid": 0.0,
            "ecc_dbe": 0.0,
        }
        if time.time() < self.at:
            return {**base, "util": 98.0, "mem": 23.0, "power": 690.0}
        if i == 3:
            return {**base, "util": 0.0, "mem": 0.0, "power": 120.0}
        return {**base, "util": 100.0, "mem": 0.0, "power": 123.0}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("seconds", type=float)
    ap.add_argument("--pod-prefix", default="hist")
    ap.add_argument("--namespace", default="lab")
    ap.add_argument("--onset", type=float, default=20.0, help="dry run: seconds to the fake hang")
    a = ap.parse_args()
    dry = os.environ.get("GPUTUI_DEVICE_DRYRUN") == "1"
    src = Fake(a.onset) if dry else Nvml()
    host = socket.gethostname()
    labels = []
    for i in range(len(src.handles)):
        uuid, model = src.ident(i)
        labels.append(
            f'{{gpu="{i}",UUID="{uuid}",device="nvidia{i}",modelName="{model}",'
            f'Hostname="{host}",container="trainer",namespace="{a.namespace}",'
            f'pod="{a.pod_prefix}-worker-{i}"}}'
        )
    rows: list[tuple[int, float, dict[str, float]]] = []
    end = time.monotonic() + a.seconds
    nxt = time.monotonic()
    while time.monotonic() < end:
        t = time.time()
        for i in range(len(labels)):
            rows.append((i, t, src.read(i)))
        nxt += 1.0
        time.sleep(max(0.0, nxt - time.monotonic()))  # the sampling period: 1 Hz
    opener = gzip.open if a.out.endswith(".gz") else open
    n = 0
    with opener(a.out, "wt", encoding="utf-8") as f:
        for metric, key in FAMILIES:
            f.write(f"# TYPE {metric} gauge\n")
            for i, lab in enumerate(labels):
                for gi, t, r in rows:
                    if gi == i and key in r:
                        f.write(f"{metric}{lab} {r[key]:g} {t:.3f}\n")
                        n += 1
        f.write("# EOF\n")
    print(
        f"SAMPLED gpus={len(labels)} samples={n} seconds={a.seconds:g} dry={int(dry)} host={host}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
