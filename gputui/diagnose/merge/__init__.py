"""Many nodes' `check --json` lines -> one job-wide verdict: the join, stacks across nodes,
a straggler across nodes, and each node's line.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "exit_code",
    "explain_host_probe",
    "HostBlame",
    "line_from_json",
    "merge",
    "Merged",
    "merged_to_json",
    "NodeReport",
    "ras_blamed",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "HostBlame": "host_blame",
    "ras_blamed": "host_blame",
    "explain_host_probe": "host_probe",
    "exit_code": "join",
    "merge": "join",
    "Merged": "merged",
    "merged_to_json": "merged",
    "line_from_json": "node_line",
    "NodeReport": "node_report",
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
