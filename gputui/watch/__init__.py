"""The Watcher: the hang detector plus the evidence gathered once per stall transition
(its gatherers and explainers), the bounded store of their records, the RAS poller and the
progress watch. Above collect, diagnose and tools; below the faces.
"""
