"""Messages from the sampler and evidence threads to the app.

SnapshotReady replaces a pending SnapshotReady: if the UI falls behind, it skips to the
newest data instead of replaying a backlog (toolong's `can_replace` idea).
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from gputui.collect.model import Snapshot


class SnapshotReady(Message):
    def __init__(self, snapshot: Snapshot, verdict: Any | None, history: Any = None) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.verdict = verdict
        self.history = history  # per-GPU recent readings, built in the sampler thread

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotReady)


class EvidenceArrived(Message):
    """Stack dumps (or other evidence) for the stalled job came in between two samples."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EvidenceArrived)


class SourceEnded(Message):
    """A replay ran out of samples."""


class SamplerFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error
