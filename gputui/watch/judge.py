"""The hang detector, made in one place, behind a public face.

Why: the faces used to build their own `Detector` (the Watcher, the exporter) and to read
its insides (`detector.memory.groups`, `detector.job_verdicts`). A `Judge` holds the one
detector of a face, made at its first use (the dashboard's first frame must not import
it), and says in public what a face may read of it. The Watcher is a Judge that adds
evidence; the exporter, which attaches to no process, uses a Judge alone.

The pure core (gputui.diagnose.hang.detector) keeps its own two numbers and its own loop
for a recording (`diagnose_trace`, what gputui.tools reads: tools sit below this package).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gputui.collect.model import Snapshot
from gputui.diagnose.verdict import Verdict
from gputui.watch.settings import WatchSettings

if TYPE_CHECKING:
    from gputui.diagnose.hang.detector import Detector

__all__ = ["Judge"]


class Judge:
    """One face's hang detector, and the public face of it."""

    def __init__(self, settings: WatchSettings, detector: Detector | None = None) -> None:
        """`detector`: one made already (a test's); else it is made at the first use."""
        self.settings = settings
        self._detector: Detector | None = detector

    @classmethod
    def around(cls, detector: Detector) -> Judge:
        """A Judge of a detector made elsewhere (a test that builds its own)."""
        return cls(WatchSettings(detector.stall_after, detector.hang_after), detector)

    @property
    def detector(self) -> Detector:
        """The NVML hang detector (gputui.diagnose.hang.detector), made when first used:
        the one place a face's detector is built."""
        d = self._detector
        if d is None:
            from gputui.diagnose.hang.detector import Detector

            s = self.settings
            d = self._detector = Detector(s.stall_after, s.hang_after)
        return d

    def judge(self, snap: Snapshot) -> Verdict:
        """The detector's verdict on `snap` alone: no evidence gathered or folded in (the
        exporter's; the Watcher's `update` adds the evidence)."""
        return self.detector.update(snap)

    @property
    def last(self) -> Verdict | None:
        """The detector's latest verdict (None before the first sample)."""
        return self.detector.last

    @property
    def runs(self) -> Mapping[int, Any]:
        """GPU index -> its current run of spinning (gputui.diagnose.hang.runs.SpinRun)."""
        return self.detector.runs

    @property
    def groups(self) -> Mapping[str, Any]:
        """Job key -> the group of GPUs and processes the detector follows for it."""
        return self.detector.memory.groups

    @property
    def job_verdicts(self) -> Mapping[str, Verdict]:
        """Job key -> its verdict at the latest sample, for every job that alarms."""
        return self.detector.job_verdicts

    @property
    def straggles(self) -> Sequence[Any]:
        """The slow jobs at the latest sample, with their stragglers and wait shares."""
        return self.detector.straggles
