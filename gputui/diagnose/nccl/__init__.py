"""What NCCL RAS, the flight recorder and PyTorch's debug server say, as ranked findings."""

from __future__ import annotations

from gputui.faces import lazy_face

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


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
