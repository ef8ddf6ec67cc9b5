"""NVML's clock event (throttle) reasons, as words.

`nvmlDeviceGetCurrentClocksEventReasons` answers a bitmask (GpuSample.events). Most bits
are ordinary (an idle GPU, a power cap the job runs into); a few say the hardware slowed the
GPU down on its own (HW slowdown, thermal, power brake), which explains a slow rank (a
straggler) and, when it lasts, points at cooling or power delivery. Values from nvml.h.
"""

from __future__ import annotations

GPU_IDLE = 0x1
APP_CLOCKS = 0x2
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SYNC_BOOST = 0x10
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80
DISPLAY_CLOCKS = 0x100

NAMES = (
    (GPU_IDLE, "idle"),
    (APP_CLOCKS, "application clocks"),
    (SW_POWER_CAP, "power cap"),
    (HW_SLOWDOWN, "HW slowdown"),
    (SYNC_BOOST, "sync boost"),
    (SW_THERMAL, "SW thermal slowdown"),
    (HW_THERMAL, "HW thermal slowdown"),
    (HW_POWER_BRAKE, "HW power brake"),
    (DISPLAY_CLOCKS, "display clocks"),
)
# The reasons that mean the hardware itself held the clocks down.
HARDWARE_SLOWDOWN = HW_SLOWDOWN | HW_THERMAL | HW_POWER_BRAKE


def clock_reasons(mask: int | None) -> list[str]:
    """The reasons in a clock-event bitmask, in nvml.h's order; [] for None or 0."""
    if not mask or mask < 0:
        return []
    return [name for bit, name in NAMES if mask & bit]


def hardware_slowdown(mask: int | None) -> list[str]:
    """Only the reasons that say the hardware slowed the GPU (HW slowdown, HW thermal,
    HW power brake): what a straggler's GPU shows when the GPU, not the job, is slow."""
    return clock_reasons((mask or 0) & HARDWARE_SLOWDOWN) if mask and mask > 0 else []
