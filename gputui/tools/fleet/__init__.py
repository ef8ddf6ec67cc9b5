"""Fan-out to many hosts or pods (ssh, srun, pdsh, kubectl), bounded, and merged."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "HostRun",
    "list_pods",
    "run_kubectl",
    "said",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "list_pods": "kube",
    "run_kubectl": "kube",
    "HostRun": "run",
    "said": "run",
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
