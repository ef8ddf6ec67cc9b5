"""The rank I/O tracker and the rendezvous watch: started once there is work for them.

Why late: both scan the host (every rank's open files; the processes that carry a job's
rank variables), and the dashboard's first frame must not wait on a scan. So they are made
at the first update that needs them, on the sampler's thread, and never after the Watcher
closed (their threads would outlive it).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from gputui.collect.model import Snapshot

if TYPE_CHECKING:
    from gputui.collect.procs.rank_tracker import RankIOTracker
    from gputui.tools.gather.rendezvous import RendezvousWatch

__all__ = ["HostHelpers"]


class HostHelpers:
    """`rankio`: where each rank writes, remembered while alive (a gone rank's log is found
    by it). `rendezvous`: ranks that never came (a job waiting in its rendezvous holds no
    GPU to spin). Each None until made, or when not wanted."""

    def __init__(
        self,
        cancel: threading.Event,
        *,
        rankio: bool,
        rendezvous: bool,
        live: bool,
        hang_after: float,
        stacks: bool,
    ) -> None:
        self._cancel = cancel
        self._wants_rankio, self._wants_rendezvous = rankio, rendezvous
        self._live, self._hang_after, self._stacks = live, hang_after, stacks
        self.rankio: RankIOTracker | None = None
        self.rendezvous: RendezvousWatch | None = None

    def start(self, snap: Snapshot) -> None:
        """Make the helpers `snap` gives work to (the rank tracker: a sample with a job)."""
        rankio_done = self.rankio is not None or not self._wants_rankio
        if rankio_done and (self.rendezvous is not None or not self._wants_rendezvous):
            return  # both made, or not wanted (every sample after the first few)
        if self._cancel.is_set():
            return
        if self.rankio is None and self._wants_rankio and snap.jobs:
            from gputui.collect.procs.rank_tracker import RankIOTracker

            self.rankio = RankIOTracker()
            if self._cancel.is_set():  # closed meanwhile (from another thread): stop it too
                self.rankio.close()
        if self.rendezvous is None and self._wants_rendezvous:
            from gputui.tools.gather.rendezvous import RendezvousWatch

            self.rendezvous = RendezvousWatch(self._live, self._hang_after, stacks=self._stacks)
            if self._cancel.is_set():  # closed meanwhile (from another thread): stop it too
                self.rendezvous.close()

    def close(self) -> None:
        if self.rankio is not None:
            self.rankio.close()
        if self.rendezvous is not None:
            self.rendezvous.close()
