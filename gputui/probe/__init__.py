"""GPU probes: the pairwise probe of one node here, the whole-world probe in `world`.

The pair probe: peer copies and a 2-rank all_reduce for every GPU pair (or only the blamed
GPU's, `blamed`). Split so that nothing here but `worker` ever imports torch: `schedule`
(which pairs run together), `faults` (test-only fault injection), `result` (dataclasses and
the matrix), `analysis` (grades, the worst link, the JSON and text), `topology` (NVLink /
PCIe per pair from NVML), `runner` (the parent side: one torch process, pairs forked from it
into their own process groups, timeouts, cancel).
"""
