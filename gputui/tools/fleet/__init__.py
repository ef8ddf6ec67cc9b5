"""Fan-out to many hosts or pods (ssh, srun, pdsh, kubectl), bounded, and merged."""

from __future__ import annotations

from gputui.faces import lazy_face

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


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
