"""What NCCL RAS, the flight recorder and PyTorch's debug server say, as ranked findings."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "explain_debugserver",
    "explain_nccl",
    "report_lines",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "explain_debugserver": "debugserver",
    "report_lines": "debugserver",
    "explain_nccl": "ras",
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
