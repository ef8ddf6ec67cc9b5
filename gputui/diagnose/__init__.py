"""Diagnosis: pure functions over the collected data, no UI imports (ever), no tools run.

The rooms, one concern each:

- `hang`: is a job stuck, and where. The per-GPU class, each GPU's run of spinning, the
  `Detector` that turns them into a `Verdict` per sample; the culprit's
  line from stacks, ranks in different collectives, the rendezvous, progress (busy).
- `nccl`: what NCCL RAS, the flight recorder and PyTorch's debug server say, as findings.
- `slow`: stragglers (each rank against its peers) and why they are slow.
- `health`: GPU health words, NVLink and PCIe error rates, what the verdict blames.
- `gone`: why a rank is gone (its last words, found while it lived or after the fact).
- `merge`: many nodes' `check --json` lines into one job-wide verdict.
- `history`: the detector's rule over a window of a cluster's history (`check --prometheus`).
- At the top, what every room shares: the `Verdict` and its `State` (one table of order,
  exit code, colour and exporter value: `states`), `Evidence` and its fold, the one ranking
  of findings, the exit codes, the jobs' groups (`job_groups`, read by the hang detector and
  the straggler rule alike), ranks in different collectives (`collective_mismatch`), the
  kernel's lines about a process (`kernel_events`).

The dashboard, `gputui check` and the incident bundle all call `Detector.update`, so they
can never disagree.
"""

from __future__ import annotations

from gputui.faces import lazy_face

__all__ = [
    "Detector",
    "Evidence",
    "Finding",
    "fold",
    "GpuState",
    "ranks_text",
    "State",
    "Strength",
    "Verdict",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "Evidence": "evidence",
    "fold": "evidence",
    "GpuState": "hang.classify",
    "Detector": "hang.detector",
    "ranks_text": "rank_lists",
    "Finding": "ranking",
    "State": "states",
    "Strength": "ranking",
    "Verdict": "verdict",
}


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
