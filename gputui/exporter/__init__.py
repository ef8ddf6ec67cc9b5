"""`gputui exporter`: the hang detector's state as Prometheus metrics, for fleets.

A face beside the dashboard and the CLI (docs/architecture.md): it reads `collect`,
`diagnose` and the watcher's RAS poller (`gputui.watch.ras_poll`), and never imports `ui`,
`commands`, `tools` or `probe` itself (tests/test_exporter_layers.py).
One Sampler thread feeds the Detector and publishes an immutable `View`; scrapes only
format the latest View, so a scrape never calls NVML and never runs the detector.

- `view`: what is exported, as plain data (no prometheus_client): built once per sample.
- `metrics`: the prometheus_client Collector that turns the latest View into metric families.
- `server`: ADDR:PORT parsing and a bounded HTTP server for prometheus_client's WSGI app.
- `looping`: a replay that starts over, for a demo exporter that runs for days.
- `run`: wires the source, the sampler, the detector and the server; ends on SIGTERM/SIGINT.
"""

from __future__ import annotations

from gputui.faces import lazy_face

__all__ = [
    "LoopingSource",
    "parse_listen",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "LoopingSource": "looping",
    "parse_listen": "server",
}


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
