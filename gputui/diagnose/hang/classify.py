"""What one GPU is doing at one sample, from the NVML readings alone.

The thresholds are fractions of the GPU's own power limit, not watts, so that a 400 W A100
and a 700 W H200 are judged by the same rule. Reference points measured on H200 (700 W,
tests/data recording): no process ~11% of the limit; a live context with no kernel ~17%; a NCCL
kernel spinning on a flag util 100 / mem_util 0 / ~18%; healthy all_reduce traffic util ~97 /
mem_util ~35 / ~41%; training util ~98 / mem_util ~23 / ~98%; a rank that waits on a slow peer
but whose collectives complete util ~99 / mem_util ~2 / ~28%.

When the power reading or the power limit is missing (the raw calibration format has no
power limit at all), spinning is judged from util and mem_util alone; the detector says so
in its reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum

from gputui.collect.model import GpuSample

# A spinning NCCL kernel is resident the whole time (util reads 100)...
SPIN_UTIL_MIN = 90.0
# ...but moves no device memory (mem_util reads 0; a waiting rank whose collectives do
# complete averages ~2 because each completed collective moves its data)...
SPIN_MEM_UTIL_MAX = 1.0
# ...and draws about the idle-with-context power (18% of the limit on H200), well below a
# waiting-but-progressing rank (28%) or all_reduce traffic (41%).
SPIN_POWER_FRAC_MAX = 0.25
# A NCCL kernel that waits in a small collective (NCCL's LL/LL128 protocols poll with many
# threads) draws more: 29-31% of the limit on 4 x H200 for a 4 MiB all_reduce, at util 100 and
# mem_util 0 every sample (tests/data/h200x4-small-collective-spin). That band overlaps a rank
# that waits on a slow peer whose collectives complete (~28%), so it counts as spinning only
# node-wide (classify_node): with mem_util at 0 and no GPU of the node computing.
SPIN_QUIET_POWER_FRAC_MAX = 0.40
SPIN_QUIET_MEM_UTIL_MAX = 0.5
# Below this util there is no kernel to speak of: idle with a context (or free).
IDLE_UTIL_MAX = 10.0
# ...as long as the memory controller is quiet too (copy engines can move data at util 0).
IDLE_MEM_UTIL_MAX = 5.0
# Above half the power limit the GPU is doing real arithmetic (training draws ~98%).
COMPUTE_POWER_FRAC_MIN = 0.5


class GpuState(str, Enum):
    """One word per GPU per sample; `str` so it prints and serializes as its value."""

    FREE = "free"  # no process on it
    IDLE = "idle"  # a process holds a context but runs no kernel
    SPINNING = "spinning"  # a kernel that runs without moving memory, at idle power
    COMMUNICATING = "communicating"  # high util, memory traffic, modest power
    COMPUTING = "computing"  # busy with arithmetic (or busy, when power is unknown)
    UNKNOWN = "unknown"  # the readings needed to tell are missing

    def __str__(self) -> str:
        return self.value


def power_known(g: GpuSample) -> bool:
    """True when the power can be judged relative to the limit (both readings present)."""
    return g.power_frac is not None


def classify_gpu(g: GpuSample) -> GpuState:
    """The state of one GPU at one sample. Pure: depends on nothing but `g`.

    A GPU with no process is FREE unless it is clearly busy (NVML does not always list the
    processes of another container). Spinning needs util >= SPIN_UTIL_MIN and mem_util <=
    SPIN_MEM_UTIL_MAX and, when the power fraction is known, power <= SPIN_POWER_FRAC_MAX.
    """
    util, mem, frac = g.util, g.mem_util, g.power_frac
    if not g.pids and (util is None or util < IDLE_UTIL_MAX):
        return GpuState.FREE
    if util is None:
        return GpuState.UNKNOWN
    if util < IDLE_UTIL_MAX and (mem is None or mem < IDLE_MEM_UTIL_MAX):
        return GpuState.IDLE
    quiet_memory = mem is None or mem <= SPIN_MEM_UTIL_MAX
    if util >= SPIN_UTIL_MIN and quiet_memory and (frac is None or frac <= SPIN_POWER_FRAC_MAX):
        if mem is None and frac is None:
            return GpuState.UNKNOWN  # a busy GPU, but nothing to tell spinning from working
        return GpuState.SPINNING
    if frac is not None and frac >= COMPUTE_POWER_FRAC_MIN:
        return GpuState.COMPUTING
    if util >= SPIN_UTIL_MIN:
        return GpuState.COMMUNICATING
    return GpuState.COMPUTING


def classify_node(gpus: Iterable[GpuSample]) -> dict[int, GpuState]:
    """The state of every GPU of one node at one sample, by GPU index (classify_all)."""
    gpus = list(gpus)
    return {g.index: st for g, st in zip(gpus, classify_all(gpus), strict=True)}


def classify_all(gpus: Sequence[GpuSample]) -> list[GpuState]:
    """The state of each GPU of one node (or one job) at one sample, in their order:
    classify_gpu, and a GPU that waits in a small collective (util >= SPIN_UTIL_MIN,
    mem_util at 0, power up to SPIN_QUIET_POWER_FRAC_MAX) is spinning when none of them
    computes.

    Why together: a rank that waits on a slow peer reads like that quiet wait, but its
    peer computes (a straggler draws ~97% of the limit); in a hang no rank computes (the
    culprit is idle, busy on the CPU, or gone). Without this, a hang in a small collective on
    4 x H200 read "busy" and exited 0.
    """
    states = [classify_gpu(g) for g in gpus]
    quiet = [
        n
        for n, g in enumerate(gpus)
        if states[n] in (GpuState.COMMUNICATING, GpuState.COMPUTING)
        and g.util is not None
        and g.util >= SPIN_UTIL_MIN
        and g.mem_util is not None
        and g.mem_util <= SPIN_QUIET_MEM_UTIL_MAX
        and g.power_frac is not None
        and g.power_frac <= SPIN_QUIET_POWER_FRAC_MAX
    ]
    if quiet and not any(
        g.power_frac is not None and g.power_frac >= COMPUTE_POWER_FRAC_MIN for g in gpus
    ):
        for n in quiet:
            states[n] = GpuState.SPINNING
    return states


def describe_state(state: GpuState) -> str:
    """Plain words for a GPU state, as used inside a reason sentence."""
    return {
        GpuState.FREE: "free (no process)",
        GpuState.IDLE: "idle with its process alive",
        GpuState.SPINNING: "spinning",
        GpuState.COMMUNICATING: "busy communicating",
        GpuState.COMPUTING: "busy computing",
        GpuState.UNKNOWN: "without readings",
    }[state]
