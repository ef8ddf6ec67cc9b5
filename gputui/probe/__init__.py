"""GPU probes: the pairwise probe of one node here, the whole-world probe in `world`.

The pair probe: peer copies and a 2-rank all_reduce for every GPU pair (or only the blamed
GPU's, `blamed`). Split so that nothing here but `worker` ever imports torch: `schedule`
(which pairs run together), `faults` (test-only fault injection), `result` (dataclasses and
the matrix), `analysis` (grades, the worst link, the JSON and text), `topology` (NVLink /
PCIe per pair from NVML), `runner` (the parent side: one torch process, pairs forked from it
into their own process groups, timeouts, cancel).
"""

from __future__ import annotations

from gputui.faces import lazy_face

__all__ = [
    "best_copy",
    "gpu_count",
    "grade",
    "holders",
    "PairResult",
    "probe_blamed",
    "ProbeConfig",
    "ProbeReport",
    "Progress",
    "refusal",
    "refused_record",
    "report_json",
    "report_record",
    "report_text",
    "run_probe",
    "save_report",
    "torch_installed",
    "worst",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "best_copy": "analysis",
    "grade": "analysis",
    "report_json": "analysis",
    "report_text": "analysis",
    "save_report": "analysis",
    "worst": "analysis",
    "holders": "blamed",
    "probe_blamed": "blamed",
    "refusal": "blamed",
    "refused_record": "blamed",
    "report_record": "blamed",
    "PairResult": "result",
    "ProbeReport": "result",
    "ProbeConfig": "runner",
    "Progress": "runner",
    "run_probe": "runner",
    "torch_installed": "runner",
    "gpu_count": "topology",
}


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
