"""Why the straggler is slow, and the `slow` Verdict that says so, from one snapshot.

The wait shares (gputui.diagnose.slow.straggler) name the rank that holds the job back; a person
then asks why. NVML already answers part of it at no cost: the straggler's clock event
reasons (a thermal or power-brake slowdown is a slow GPU, whatever the code does), its power
and SM clock against its peers (more work draws more power), and the host CPU use of its
process (a rank busy on the CPU while its GPU idles is held back by its input pipeline or
Python). Where the time goes inside the process is py-spy's part (gputui.tools.attach.profile).
"""

from __future__ import annotations

import statistics
from typing import Any

from gputui.collect.model import GpuSample, Snapshot
from gputui.diagnose.slow.straggler import Straggle
from gputui.diagnose.slow.words import headline, who
from gputui.diagnose.verdict import SLOW, Verdict

# nvmlDeviceGetCurrentClocksEventReasons bits (nvml.h, nvmlClocksEventReason*)
EVENT_NAMES = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clocks"),
)
WORDS = {
    "gpu_idle": "GPU idle",
    "applications_clocks": "application clocks setting",
    "sw_power_cap": "software power cap",
    "hw_slowdown": "hardware slowdown",
    "sync_boost": "sync boost",
    "sw_thermal_slowdown": "software thermal slowdown",
    "hw_thermal_slowdown": "hardware thermal slowdown",
    "hw_power_brake_slowdown": "hardware power brake",
    "display_clocks": "display clock setting",
}
# The reasons that hold a GPU back whatever it runs: a slow GPU, not a slow program. The
# software power cap is not one: a GPU at full load reads it (the recorded straggler did).
SLOWDOWNS = frozenset(
    {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)
CPU_BOUND_PERCENT = 90.0  # a rank whose process uses a whole core or more


def event_names(mask: int | None) -> list[str]:
    """The names of the set bits, known ones only (later drivers add bits)."""
    if mask is None:
        return []
    return [name for bit, name in EVENT_NAMES if mask & bit]


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _cpu(snap: Snapshot, pids: tuple[int, ...]) -> float | None:
    vals = [p.cpu_percent for pid in pids if (p := snap.process(pid)) and p.cpu_percent is not None]
    return sum(vals) if vals else None


def why(s: Straggle, snap: Snapshot) -> tuple[dict[str, Any], list[str]]:
    """The straggler's readings against its peers' (a dict for JSON) and the sentences."""
    peers = [g for i in s.waiters if (g := snap.gpu(i)) is not None]
    detail: dict[str, Any] = {"gpus": {}}
    words: list[str] = []
    peer_power = _median([g.power_w for g in peers if g.power_w is not None])
    peer_mhz = _median([g.sm_mhz for g in peers if g.sm_mhz is not None])
    peer_cpu = _median([c for i in s.waiters if (c := _cpu(snap, s.pids.get(i, ()))) is not None])
    detail["peers"] = {"power_w": peer_power, "sm_mhz": peer_mhz, "cpu_percent": peer_cpu}
    for i in s.stragglers:
        g = snap.gpu(i) or GpuSample(i)
        events = [e for e in event_names(g.events) if e != "gpu_idle"]
        cpu = _cpu(snap, s.pids.get(i, ()))
        detail["gpus"][str(i)] = {
            "events": events,
            "power_w": g.power_w,
            "power_frac": None if g.power_frac is None else round(g.power_frac, 3),
            "sm_mhz": g.sm_mhz,
            "temp_c": g.temp_c,
            "cpu_percent": cpu,
        }
        words += _sentences(i, g, events, cpu, peer_power, peer_mhz, peer_cpu)
    return detail, words


def _sentences(
    i: int,
    g: GpuSample,
    events: list[str],
    cpu: float | None,
    peer_power: float | None,
    peer_mhz: float | None,
    peer_cpu: float | None,
) -> list[str]:
    out = []
    held = [WORDS[e] for e in events if e in SLOWDOWNS]
    if held:
        out.append(
            f"GPU {i}'s clocks are held back by {', '.join(held)}: a slow GPU (cooling, power "
            "delivery), not more work; check its temperature and `nvidia-smi -q -d PERFORMANCE`"
        )
    parts = []
    if g.power_w is not None:
        pct = f" ({g.power_frac:.0%} of its limit)" if g.power_frac is not None else ""
        peer = f" vs {peer_power:.0f} W" if peer_power is not None else ""
        parts.append(f"{g.power_w:.0f} W{pct}{peer}")
    if g.sm_mhz is not None:
        peer = f" vs {peer_mhz:.0f} MHz" if peer_mhz is not None else ""
        parts.append(f"SM clock {g.sm_mhz:.0f} MHz{peer}")
    if parts:
        reasons = ", ".join(WORDS[e] for e in events) or "none"
        reasons = "not reported" if g.events is None else reasons
        out.append(
            f"GPU {i} against its waiting peers: "
            + "; ".join(parts)
            + f" (clock event reasons: {reasons})"
        )
    if cpu is not None:
        peer = f" vs {peer_cpu:.0f}% on its peers" if peer_cpu is not None else ""
        out.append(f"its process uses {cpu:.0f}% CPU{peer}")
        if cpu >= CPU_BOUND_PERCENT and (peer_cpu is None or cpu > 2 * peer_cpu):
            out.append(
                "it is busy on the host CPU: a data loader, a CPU-bound step or a sync such "
                "as .item(); profile it to see where (P on it in the dashboard, or "
                "`gputui check --profile-straggler`)"
            )
    if not held and g.power_frac is not None and g.power_frac >= 0.8:
        out.append(
            "it draws far more power than its peers: it does more GPU work per step (uneven "
            "shards, a longer sequence or larger batch, extra work on one rank)"
        )
    return out


def next_steps_slow(s: Straggle) -> tuple[str, ...]:
    pid = next((p for i in s.stragglers for p in s.pids.get(i, ())), None)
    steps = []
    if pid is not None:
        steps.append(
            f"Where the straggler spends its time: select it and press P (a few seconds of "
            f"py-spy sampling), or `py-spy top --pid {pid}`."
        )
    steps.append(
        "Compare the straggler's work with its peers': data shard sizes, sequence lengths, "
        "work done on one rank only (logging, evaluation, checkpoints)."
    )
    steps.append(
        "A slow GPU (thermal or power slowdown) is the node's problem: `nvidia-smi -q -d "
        "PERFORMANCE,TEMPERATURE` on it, and move the job off it."
    )
    return tuple(steps)


def slow_verdict(s: Straggle, snap: Snapshot, wait_share: dict[int, float]) -> Verdict:
    """The node's verdict for a slow job: state `slow`, its stragglers, every wait share."""
    detail, words = why(s, snap)
    reason = headline(s) + "." + "".join(f" {w[0].upper()}{w[1:]}." for w in words)
    return Verdict(
        t=snap.t,
        state=SLOW,
        reason=reason,
        next_steps=next_steps_slow(s),
        job=s.label,
        stragglers=s.stragglers,
        wait_share=wait_share,
        slow_why={
            "who": who(s, s.stragglers),
            "pids": [p for i in s.stragglers for p in s.pids.get(i, ())],
            **detail,
        },
    )
