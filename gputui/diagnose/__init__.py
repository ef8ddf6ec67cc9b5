"""Diagnosis: pure functions over the collected data, no UI imports (ever), no tools run.

The rooms, one concern each:

- `hang`: is a job stuck, and where. The per-GPU class, each GPU's run of spinning, the
  jobs' groups, the `Detector` that turns them into a `Verdict` per sample; the culprit's
  line from stacks, ranks in different collectives, the rendezvous, progress (busy).
- `nccl`: what NCCL RAS, the flight recorder and PyTorch's debug server say, as findings.
- `slow`: stragglers (each rank against its peers) and why they are slow.
- `health`: GPU health words, NVLink and PCIe error rates, what the verdict blames.
- `gone`: why a rank is gone (its last words, found while it lived or after the fact).
- `merge`: many nodes' `check --json` lines into one job-wide verdict.
- At the top, what every room shares: the `Verdict`, `Evidence` and its fold, the one
  ranking of findings, the exit codes.

The dashboard, `gputui check` and the incident bundle all call `Detector.update`, so they
can never disagree.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Detector", "GpuState", "Verdict", "classify_gpu", "diagnose_trace"]
_WHERE = {
    "Detector": "hang.detector",
    "diagnose_trace": "hang.detector",
    "GpuState": "hang.classify",
    "classify_gpu": "hang.classify",
    "Verdict": "verdict",
}


def __getattr__(name: str) -> Any:
    """The package's names, imported on first use: `gputui check --help` reads the exit-code
    table (gputui.diagnose.exitcodes) without paying for the detector."""
    if name in _WHERE:
        return getattr(importlib.import_module(f"gputui.diagnose.{_WHERE[name]}"), name)
    raise AttributeError(name)
