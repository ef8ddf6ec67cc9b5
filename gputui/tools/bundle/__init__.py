"""The incident bundle: what it writes, the trace that replays to its verdict, last words."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "append_note",
    "default_bundle_dir",
    "on_sigterm_cancel",
    "write_bundle",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "append_note": "safedir",
    "on_sigterm_cancel": "safedir",
    "default_bundle_dir": "write",
    "write_bundle": "write",
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
