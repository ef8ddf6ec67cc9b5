"""The Watcher: the hang detector plus the evidence gathered once per stall transition
(its gatherers and explainers), the bounded store of their records, the RAS poller and the
progress watch. Above collect, diagnose and tools; below the faces.

The public face, for every face (dashboard, commands, exporter):

- `WatchSettings` (`settings`): every option of a Watcher in one frozen object, built from a
  command line by `WatchSettings.from_args`.
- `WatchRun` (`run`): the one loop: a Watcher made from the settings, fed snapshot by
  snapshot (or over a whole recording: `verdicts_over`, `last_verdict`), closed at the end.
- `Judge` (`judge`): the detector, made in one place, and what a face may read of it; the
  exporter uses it alone, and the `Watcher` (`watcher`) is a Judge that adds evidence.

Names are imported on first use: the dashboard's first frame pays only for what it uses.
"""

from __future__ import annotations

from gputui.faces import lazy_face

__all__ = ["Judge", "WatchRun", "WatchSettings", "Watcher", "last_verdict", "verdicts_over"]
_WHERE = {
    "Judge": "judge",
    "WatchRun": "run",
    "last_verdict": "run",
    "verdicts_over": "run",
    "WatchSettings": "settings",
    "Watcher": "watcher",
}


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
