"""What the driver says, through NVML: the bounded NVML thread and reader, the NVLink
counters read off the sampling path, health events, and the Xid catalogue.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "GPU_UNREADABLE",
    "HARDWARE",
    "info",
    "NO_DRIVER_HINT",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "DEFAULT_TIMEOUT_S": "reader",
    "GPU_UNREADABLE": "reader",
    "NO_DRIVER_HINT": "reader",
    "HARDWARE": "xid",
    "info": "xid",
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
