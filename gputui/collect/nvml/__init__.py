"""What the driver says, through NVML: the bounded NVML thread and reader, the NVLink
counters read off the sampling path, health events, and the Xid catalogue.
"""

from __future__ import annotations

from gputui.faces import lazy_face

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


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
