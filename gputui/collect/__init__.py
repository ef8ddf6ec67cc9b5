"""Data collection: NVML, psutil and recorded traces into immutable Snapshots (no UI here)."""
