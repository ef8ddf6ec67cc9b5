"""Data collection: NVML, psutil and recorded traces into immutable Snapshots (no UI here).

The rooms: `nvml` (the driver: the bounded NVML thread, readings, NVLink counters, health
events, the Xid catalogue), `procs` (host processes: the table, jobs and ranks, owners,
PID namespaces, where ranks write, their progress), `nccl` (NCCL RAS, the flight recorder,
PyTorch's debug server: asked and parsed), `trace` (recordings: format, bounded reader,
record shapes). At the top what they share: the Snapshot model, the Source and Sampler,
stack frames, the kernel log, host lists and bounded reads. Collect reads; it never judges
(an import-linter contract keeps it below gputui.diagnose).
"""
