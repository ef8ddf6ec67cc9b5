"""Many nodes' `check --json` lines -> one job-wide verdict: the join, stacks across nodes,
a straggler across nodes, and each node's line.
"""

from __future__ import annotations

from gputui.faces import lazy_face

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


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
