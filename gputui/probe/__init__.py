"""Pairwise GPU communication probe: peer copies and 2-rank all_reduce for every GPU pair.

Split so that nothing here but `worker` ever imports torch: `schedule` (which pairs run
together), `faults` (test-only fault injection), `result` (dataclasses, JSON, the matrix and
the worst link), `topology` (NVLink / PCIe per pair from NVML), `runner` (the parent side:
one torch process, pairs forked from it into their own process groups, timeouts, cancel).
"""
