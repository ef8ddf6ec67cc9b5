"""History from a Prometheus-compatible server: the GPU series dcgm-exporter (or gputui's own
exporter) left there, read back over the HTTP API for `check --prometheus`.

`timespec` parses --from/--to, `client` talks to the server (query_range in chunks under its
points-per-series limit, a bounded pool of fetchers, one deadline over the whole exchange),
`names` knows the metric and label names, `columns` lays the series out per GPU on the step
grid. It reads and never judges: gputui.diagnose.history does.
"""
