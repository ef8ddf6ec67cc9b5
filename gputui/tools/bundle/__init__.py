"""The incident bundle: what it writes, the trace that replays to its verdict, last words."""

from __future__ import annotations

from gputui.faces import lazy_face

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


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
