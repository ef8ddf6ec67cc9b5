"""The immutable data every layer shares: one Snapshot per sample.

Every reading that can fail is Optional: None means "not available", and the reason, when
known, sits in `GpuSample.na` under the field's name. The UI shows N/A; nothing raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one instant, as NVML (or a recording) reported it."""

    index: int
    name: str | None = None
    uuid: str | None = None
    util: float | None = None  # percent of time a kernel ran (nvmlDeviceGetUtilizationRates.gpu)
    mem_util: float | None = None  # percent of time device memory was read/written
    power_w: float | None = None  # averaged board power
    power_limit_w: float | None = None  # enforced power limit
    mem_used_mb: float | None = None  # MiB
    mem_total_mb: float | None = None  # MiB
    temp_c: float | None = None
    sm_mhz: float | None = None
    mem_mhz: float | None = None
    pstate: int | None = None
    events: int | None = None  # clock event reasons bitmask (1 = GPU idle)
    pids: tuple[int, ...] = ()  # compute processes NVML sees on this GPU
    proc_mem_mb: tuple[tuple[int, float | None], ...] = ()  # (pid, used MiB) per process
    # Inside a container whose driver hides other namespaces' processes: memory in use that
    # no process listed here holds (another container's), MiB; None elsewhere.
    mem_outside_mb: float | None = None
    # field name -> why it is not available. The key "gpu" (nvml.GPU_UNREADABLE) means the
    # whole GPU gave no reading (NVML: "GPU is lost", or no handle): every reading is None.
    na: dict[str, str] = field(default_factory=dict)

    @property
    def power_frac(self) -> float | None:
        """Power as a fraction of the limit: the hang signature is relative, not absolute."""
        if self.power_w is None or not self.power_limit_w:
            return None
        return self.power_w / self.power_limit_w


@dataclass(frozen=True)
class RankInfo:
    """Where a process sits in a distributed job, read from its environment."""

    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    local_world_size: int | None = None
    master: str | None = None  # "MASTER_ADDR:MASTER_PORT"
    run_id: str | None = None  # TORCHELASTIC_RUN_ID
    slurm_job_id: str | None = None


@dataclass(frozen=True)
class ProcessInfo:
    """A host process as psutil (or a recording) saw it.

    `create_time` together with `pid` identifies the process: actions check both before
    acting, so a recycled pid is never attached to by mistake.
    """

    pid: int
    create_time: float | None = None
    user: str | None = None
    name: str | None = None
    cmdline: tuple[str, ...] = ()
    state: str | None = None  # psutil status: running, sleeping, disk-sleep, stopped, zombie...
    cpu_percent: float | None = None
    rss_mb: float | None = None
    ppid: int | None = None
    parent_cmd: str | None = None
    gpus: tuple[int, ...] = ()  # GPU indices this process has a context on
    gpu_mem_mb: float | None = None  # summed over its GPUs
    rank: RankInfo | None = None
    env_error: str | None = None  # why the environment could not be read, if it could not
    live: bool = True  # False for processes from a recording: nothing here can attach to them
    # Whose process it is (gputui.collect.procs.owner.Owner: pod, container, Slurm job), or None.
    owner: Any = None
    # Inside a container whose driver reports host pids: the pid NVML gave, when it differs
    # from `pid` (the one that works here), and whether that match is a guess.
    nvml_pid: int | None = None
    pid_guess: bool = False

    @property
    def command(self) -> str:
        return " ".join(self.cmdline) if self.cmdline else (self.name or "?")

    def elapsed_s(self, now: float) -> float | None:
        return None if self.create_time is None else max(0.0, now - self.create_time)


@dataclass(frozen=True)
class Job:
    """Processes that belong to one distributed run; ranks in rank order where known."""

    key: str  # stable id, e.g. "torchelastic:abc" or "master:10.0.0.1:29500" or "node"
    label: str  # what the UI shows
    pids: tuple[int, ...]
    gpus: tuple[int, ...]
    world_size: int | None = None
    how: str = ""  # how the grouping was found, said to the user


@dataclass(frozen=True)
class Snapshot:
    """Everything gputui knows at one sample time. Immutable, so it is safe across threads."""

    t: float  # sample time, Unix seconds (the file's own time in a replay)
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[ProcessInfo, ...] = ()
    jobs: tuple[Job, ...] = ()
    source: str = "nvml"  # "nvml", "replay", "host"
    gpu_error: str | None = None  # why there are no GPU readings, when there are none
    phase: str | None = None  # ground-truth label carried by calibration traces
    driver: str | None = None
    hostname: str | None = None
    # Records of a recording that are not GPU samples but belong at this sample's time, such
    # as the stack dumps `gputui record` took (`{"type": "stacks", ...}`); validated by the
    # reader, interpreted by their consumers. Live snapshots carry GPU health records
    # (`{"type": "health", ...}`, gputui.collect.nvml.health), which `gputui record` writes.
    records: tuple[dict[str, Any], ...] = ()
    # True when the source carries no process information at all (nvidia-smi's CSV, a
    # history file of readings without `pids`): "no process listed" then means "not
    # known", not "none", and the detector takes the node's GPUs in use as one job
    # (gputui.diagnose.job_groups). Not compared: it says where the readings came from.
    readings_only: bool = field(default=False, compare=False)

    def process(self, pid: int) -> ProcessInfo | None:
        for p in self.processes:
            if p.pid == pid:
                return p
        return None

    def gpu(self, index: int) -> GpuSample | None:
        for g in self.gpus:
            if g.index == index:
                return g
        return None
