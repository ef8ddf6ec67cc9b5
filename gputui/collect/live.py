"""The live Source: NVML for the GPUs, psutil for their processes (or the busiest host
processes when this node has no GPU to show)."""

from __future__ import annotations

import socket
import time

from gputui.collect.jobs import group_jobs
from gputui.collect.model import Snapshot
from gputui.collect.nvml import NvmlReader
from gputui.collect.procs import HostTop, ProcessReader


class LiveSource:
    kind = "nvml"

    def __init__(self, interval: float = 1.0, host_limit: int = 40) -> None:
        self.interval = interval
        self.nvml = NvmlReader()
        self.procs = ProcessReader()
        self.host = HostTop(host_limit) if not self.nvml.devices else None
        self.hostname = socket.gethostname()
        if self.nvml.devices:
            self.description = (
                f"live NVML, {len(self.nvml.devices)} GPU(s), driver {self.nvml.driver}"
            )
        else:
            self.kind = "host"
            self.description = "host processes only (no GPUs)"

    def sample(self) -> Snapshot:
        t = time.time()
        gpus = tuple(self.nvml.read())
        want: dict[int, tuple[tuple[int, ...], float | None]] = {}
        for g in gpus:
            mem = dict(g.proc_mem_mb)
            for pid in g.pids:
                idx, total = want.get(pid, ((), None))
                m = mem.get(pid)
                total = (total or 0.0) + m if m is not None else total
                want[pid] = (idx + (g.index,), total)
        if self.host is not None:
            for pid in self.host.pids():
                want.setdefault(pid, ((), None))
        processes = tuple(self.procs.read(want))
        return Snapshot(
            t=t,
            gpus=gpus,
            processes=processes,
            jobs=group_jobs(processes),
            source=self.kind,
            gpu_error=self.nvml.error,
            driver=self.nvml.driver,
            hostname=self.hostname,
        )

    def next_delay(self) -> float:
        return self.interval

    def close(self) -> None:
        self.nvml.close()
