"""Data collection: NVML, psutil and recorded traces into immutable Snapshots (no UI here).

The rooms: `nvml` (the driver: the bounded NVML thread, readings, NVLink counters, health
events, the Xid catalogue), `procs` (host processes: the table, jobs and ranks, owners,
PID namespaces, where ranks write, their progress), `nccl` (NCCL RAS, the flight recorder,
PyTorch's debug server: asked and parsed), `trace` (recordings: format, bounded reader,
record shapes), `prom` (a cluster's GPU history from a Prometheus-compatible server). At
the top what they share: the Snapshot model, the Source and Sampler, stack frames, the
kernel log, host lists and bounded reads. Collect reads; it never judges (an import-linter
contract keeps it below gputui.diagnose).
"""

from __future__ import annotations

from gputui.faces import lazy_face

__all__ = [
    "ChildStack",
    "clip",
    "collective_name",
    "demo_path",
    "expand_hosts",
    "filter_gpus",
    "FilteredSource",
    "Frame",
    "GpuSample",
    "host_from_name",
    "HostListError",
    "is_this_host",
    "Job",
    "job_start",
    "KernelLog",
    "LiveSource",
    "loads_bounded",
    "main_thread",
    "MAX_CHILDREN",
    "MAX_FRAMES",
    "MAX_SIDE_FRAMES",
    "MAX_THREADS",
    "NoSuchGpus",
    "ProcessInfo",
    "rank_stacks_of_record",
    "RankStack",
    "ReplaySource",
    "sample_bounded",
    "Sampler",
    "Snapshot",
    "Source",
    "ThreadStack",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "sample_bounded": "bounded",
    "loads_bounded": "capped",
    "ChildStack": "frames",
    "clip": "frames",
    "collective_name": "frames",
    "Frame": "frames",
    "main_thread": "frames",
    "MAX_CHILDREN": "frames",
    "MAX_FRAMES": "frames",
    "MAX_SIDE_FRAMES": "frames",
    "MAX_THREADS": "frames",
    "rank_stacks_of_record": "frames",
    "RankStack": "frames",
    "ThreadStack": "frames",
    "expand_hosts": "hostlist",
    "host_from_name": "hostlist",
    "HostListError": "hostlist",
    "KernelLog": "kernlog",
    "LiveSource": "live",
    "GpuSample": "model",
    "Job": "model",
    "ProcessInfo": "model",
    "Snapshot": "model",
    "Sampler": "sampler",
    "demo_path": "source",
    "filter_gpus": "source",
    "FilteredSource": "source",
    "job_start": "source",
    "NoSuchGpus": "source",
    "ReplaySource": "source",
    "Source": "source",
    "is_this_host": "this_host",
}


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
