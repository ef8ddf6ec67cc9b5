"""GPU health, judged: one word per GPU (`judge`), NVLink and PCIe error rates, the findings
that join a stalled or slow job's verdict (`findings`), what the verdict blames, and the
blamed GPU's probe result.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Blame",
    "blamed",
    "bundle_health",
    "explain_blamed_probe",
    "forced",
    "health_evidence",
    "health_key",
    "health_line",
    "health_text",
    "HealthTracker",
    "KIND",
    "probe_findings",
    "with_health_headline",
    "with_links",
    "with_probe_findings",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "Blame": "blame",
    "blamed": "blame",
    "forced": "blame",
    "explain_blamed_probe": "blamed_probe",
    "KIND": "blamed_probe",
    "probe_findings": "blamed_probe",
    "with_probe_findings": "blamed_probe",
    "HealthTracker": "judge",
    "bundle_health": "report",
    "health_key": "report",
    "health_line": "report",
    "health_text": "report",
    "health_evidence": "findings",
    "with_health_headline": "findings",
    "with_links": "findings",
}


def __getattr__(name: str) -> Any:
    """A name of the face, imported on first use (PEP 562): importing one module of this
    package (the dashboard's first frame imports a few) does not import the others."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
