"""History from a Prometheus-compatible server: the GPU series dcgm-exporter (or gputui's own
exporter) left there, read back over the HTTP API for `check --prometheus`.

`timespec` parses --from/--to, `client` talks to the server (query_range in chunks under its
points-per-series limit, a bounded pool of fetchers, one deadline over the whole exchange),
`names` knows the metric and label names, `columns` lays the series out per GPU on the step
grid. It reads and never judges: gputui.diagnose.history does.
"""

from __future__ import annotations

from gputui.faces import lazy_face

__all__ = [
    "check_match",
    "default_limit",
    "GpuColumns",
    "History",
    "iso",
    "open_server",
    "Owner",
    "parse_time",
    "read_history",
    "SEEN",
    "window",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "open_server": "client",
    "GpuColumns": "columns",
    "History": "columns",
    "Owner": "columns",
    "SEEN": "columns",
    "read_history": "fetch",
    "check_match": "names",
    "default_limit": "names",
    "iso": "timespec",
    "parse_time": "timespec",
    "window": "timespec",
}


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
