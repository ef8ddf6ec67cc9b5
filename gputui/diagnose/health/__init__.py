"""GPU health, judged: one word per GPU (`judge`), NVLink and PCIe error rates, the findings
that join a stalled or slow job's verdict (`findings`), what the verdict blames, and the
blamed GPU's probe result.
"""

from __future__ import annotations

from gputui.faces import lazy_face

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


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
