"""The hang detector: pure functions over a window of Snapshots, no UI imports (ever).

`classify` names what each GPU is doing at one sample, `runs` follows how long a GPU has been
spinning, `groups` remembers which GPUs belong to which job (a dead rank included), and
`detector` turns all that into a `Verdict` per sample. The dashboard, `gputui check` and the
incident bundle all call `Detector.update`, so they can never disagree.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Detector", "GpuState", "Verdict", "classify_gpu", "diagnose_trace"]
_WHERE = {
    "Detector": "detector",
    "diagnose_trace": "detector",
    "GpuState": "classify",
    "classify_gpu": "classify",
    "Verdict": "verdict",
}


def __getattr__(name: str) -> Any:
    """The package's names, imported on first use: `gputui check --help` reads the exit-code
    table (gputui.diagnose.exitcodes) without paying for the detector."""
    if name in _WHERE:
        return getattr(importlib.import_module(f"gputui.diagnose.{_WHERE[name]}"), name)
    raise AttributeError(name)
