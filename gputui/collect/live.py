"""The live Source: NVML for the GPUs, psutil for their processes (or the busiest host
processes when this node has no GPU to show).

Every NVML call is bounded by `timeout` (see nvml.py). A start that does not answer raises
NvmlHung from the constructor; a read that does not answer raises it from `sample()`, and so
does every later sample: a failed sample, reported, never a silent one (the dashboard keeps
its last snapshot and shows it as stale).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gputui.collect.model import GpuSample, Snapshot
from gputui.collect.nvml.reader import (
    DEFAULT_TIMEOUT_S,
    FAILING,
    GPU_UNREADABLE,
    HUNG,
    NvmlReader,
    unreadable_message,
)
from gputui.collect.nvml.thread import NvmlHung

if TYPE_CHECKING:
    from gputui.collect.nvml.health import HealthMonitor


class LiveSource:
    kind = "nvml"

    def __init__(
        self,
        interval: float = 1.0,
        host_limit: int = 40,
        timeout: float = DEFAULT_TIMEOUT_S,
        health_events: bool = True,
        nvlink: bool | None = None,
        on_gpus: Callable[[Snapshot, str], object] | None = None,
    ) -> None:
        """`on_gpus(snapshot, description)`: called with the GPUs' first reading (no process,
        no health) as soon as NVML has answered, before the process and health readers are
        even imported (psutil, the redaction rules, the health monitor: about half of the
        start-up's imports): the dashboard draws its first frame from it. That reading is
        then the GPU part of the first `sample()`, so no extra NVML call is made."""
        self.interval = interval
        self.nvml = NvmlReader(timeout=timeout)
        if self.nvml.status == HUNG:
            raise NvmlHung(self.nvml.error or "NVML did not answer")
        self.hostname = socket.gethostname()
        if self.nvml.devices:
            self.description = (
                f"live NVML, {len(self.nvml.devices)} GPU(s), driver {self.nvml.driver}"
            )
        else:
            self.kind = "host"
            self.description = "host processes only (no GPUs)"
        self._early: tuple[float, tuple[GpuSample, ...]] | None = None
        if on_gpus is not None and self.nvml.devices:
            self._first_reading(on_gpus)
        from gputui.collect.nvml.health import HealthMonitor
        from gputui.collect.procs.nsmap import PidMapper
        from gputui.collect.procs.podresources import PodResources
        from gputui.collect.procs.reader import HostTop, ProcessReader

        # GPU health (Xids, ECC, remaps, lost GPUs): records in each snapshot; the Xid event
        # thread and the NVLink error counters (a thread of their own, from the second
        # sample on) only for the commands that watch for a while (health_events; `nvlink`
        # None: the same as health_events).
        links = health_events if nvlink is None else nvlink
        self.health: HealthMonitor | None = (
            HealthMonitor(self.nvml, events=health_events, nvlink=links)
            if self.nvml.devices
            else None
        )
        self.procs = ProcessReader()
        self.pidmap = PidMapper()
        self.podres = PodResources()
        self.host = HostTop(host_limit) if not self.nvml.devices else None

    def _first_reading(self, on_gpus: Callable[[Snapshot, str], object]) -> None:
        """The GPUs read once, kept for the first sample and handed to `on_gpus`. A read that
        fails is not kept (the first sample reads again and says why); an `on_gpus` that
        fails costs only the early frame."""
        t = time.time()
        try:
            gpus = tuple(self.nvml.read())
        except Exception:  # noqa: S110 - said by the first sample
            return
        self._early = (t, gpus)
        try:
            on_gpus(self._snapshot(t, gpus), self.description)
        except Exception:  # noqa: S110 - a frame drawn early is a nicety, not the start
            pass

    def _snapshot(self, t: float, gpus: tuple[GpuSample, ...], **more: Any) -> Snapshot:
        """GPUs alone (the early reading that `on_gpus` is given), or with `more` (the
        processes, jobs and records of a whole sample): one place that fills a Snapshot."""
        return Snapshot(
            t=t,
            gpus=gpus,
            source=self.kind,
            gpu_error=self.nvml.error or unreadable_message(gpus),
            driver=self.nvml.driver,
            hostname=self.hostname,
            **more,
        )

    def sample(self) -> Snapshot:
        from gputui.collect.procs.jobs import group_jobs
        from gputui.collect.procs.nsmap import reconcile
        from gputui.collect.procs.podresources import name_pods

        if self._early is not None:  # the reading `on_gpus` was given: not read again
            (t, raw), self._early = self._early, None
        else:
            t, raw = time.time(), tuple(self.nvml.read())
        # Inside a container, NVML's pids may be the host's: made into pids that work here.
        gpus, matched = reconcile(raw, self.pidmap)
        want: dict[int, tuple[tuple[int, ...], float | None]] = {}
        for g in gpus:
            mem = dict(g.proc_mem_mb)
            for pid in g.pids:
                idx, total = want.get(pid, ((), None))
                m = mem.get(pid)
                total = (total or 0.0) + m if m is not None else total
                want[pid] = (idx + (g.index,), total)
        cpu: dict[int, float] = {}
        if self.host is not None:
            for pid, pct in self.host.top():  # busiest first
                want.setdefault(pid, ((), None))
                if pct is not None:
                    cpu[pid] = pct
        read = self.procs.read(want, cpu=cpu)
        if matched:
            read = [
                replace(p, nvml_pid=m.nvml_pid, pid_guess=m.guess)
                if (m := matched.get(p.pid)) is not None
                else p
                for p in read
            ]
        # Host processes busiest first. HostTop ranked them, but a process it had not measured
        # yet may have been measured by ProcTable since (it appeared between two scans), so
        # rank again on the figures shown: GPU processes first, then by CPU, unmeasured last.
        read = name_pods(read, gpus, self.podres)  # pod names from the kubelet, where it answers
        gpu_procs = [p for p in read if p.gpus]
        host = sorted(
            (p for p in read if not p.gpus),
            key=lambda p: (p.cpu_percent is None, -(p.cpu_percent or 0.0)),
        )
        processes = tuple(gpu_procs + host)
        records = tuple(self.health.poll(t)) if self.health is not None else ()
        return self._snapshot(
            t, gpus, processes=processes, jobs=group_jobs(processes), records=records
        )

    def next_delay(self) -> float:
        return self.interval

    def problem(self, snap: Snapshot | None = None, lost: bool = True) -> str | None:
        """What is wrong with NVML, in one line, or None: it failed to start although a
        driver is here, it stopped answering (even in nvmlShutdown), or `snap` has GPUs that
        cannot be read. No driver at all is not a problem: there is nothing to watch.
        `lost=False`: a GPU NVML reports lost is GPU health (`check` goes on watching the
        others and exits 3), not NVML's trouble."""
        said = []
        if self.nvml.status in (FAILING, HUNG):
            said.append(self.nvml.error or "NVML failed")
        gpus = [] if snap is None else list(snap.gpus)
        if not lost:
            gpus = [g for g in gpus if "lost" not in g.na.get(GPU_UNREADABLE, "").lower()]
        if gpus and (bad := unreadable_message(gpus)):
            said.append(bad)
        return "; ".join(said) or None

    def close(self) -> None:
        """nvmlShutdown, bounded by `timeout`; a shutdown that overstays shows in problem().
        The Xid event and NVLink threads end first (within one wait, one link), so no call
        follows the shutdown."""
        if self.health is not None and not self.health.close():
            self.nvml.leave()  # the Xid thread is stuck in NVML: never queue a shutdown behind it
            return
        self.nvml.close()

    def leave(self) -> None:
        """Close for a process that exits right away: nvmlShutdown is not waited for."""
        if self.health is not None:
            self.health.stop()
        self.nvml.leave()
