"""Whether a stalled job's PyTorch debug server answers, for the exporter.

The exporter never attaches to a process and never gathers a stall's evidence, but asking a
debug server's front end for its index page costs one local HTTP request (gputui's own
confirmation, gputui.collect.nccl.debugserver_ask): so while a job is stalled, it is asked
once, and again every ASK_EVERY_S while the stall lasts, in one thread of its own. The answer is the
`gputui_job_debug_server` gauge: 1 when the job's front end answered, 0 when gputui asked and
none did (the job did not start one, or it is gone), no series while the job is not stalled.
An operator's alert on a hung job can then say whether every rank's line is one request
away. Read by the sampler thread only; the scrape reads the View.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from gputui.collect.model import ProcessInfo, Snapshot

if TYPE_CHECKING:
    from gputui.watch.judge import Judge

ASK_EVERY_S = 30.0
NAMES = ("gputui_job_debug_server",)


def answers(ranks: tuple[ProcessInfo, ...], cancel: threading.Event) -> bool:
    """Whether the job's front end (rank 0's child here, else MASTER_ADDR:25999) answers."""
    from gputui.collect.nccl import debugserver_find as find
    from gputui.collect.nccl.debugserver_ask import Fetch, confirm
    from gputui.collect.this_host import is_this_host

    rank0 = next((p for p in ranks if p.rank is not None and p.rank.rank == 0), None)
    if rank0 is not None:
        cands = find.front_end_candidates(rank0.pid)
    else:
        master = next((p.rank.master for p in ranks if p.rank is not None and p.rank.master), None)
        m = find.master_candidate(master)
        cands = [m] if m is not None and not is_this_host(m.host) else []
    fetch = Fetch(cancel)
    return any(confirm(c, fetch)[0] for c in cands[:4] if not cancel.is_set())


class DebugServerUp:
    def __init__(self, every: float = ASK_EVERY_S) -> None:
        self.every = every
        self.cancel = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gputui-debugserver")
        self._asked: dict[str, float] = {}  # job key -> when last asked (monotonic)
        self._up: dict[str, bool] = {}
        self._running: dict[str, Future[Any]] = {}

    def update(self, snap: Snapshot, judge: Judge) -> None:
        """Ask for each stalled or hung job that is due; forget the others."""
        procs = {p.pid: p for p in snap.processes}
        now = time.monotonic()
        stalled = set()
        for key, v in judge.job_verdicts.items():
            if not v.alarm:
                continue
            stalled.add(key)
            fut = self._running.get(key)
            if fut is not None and fut.done():
                try:
                    self._up[key] = bool(fut.result())
                except Exception:  # a bug in the ask must not end the sampler thread
                    self._up[key] = False
                del self._running[key]
            if key in self._running or now - self._asked.get(key, -1e9) < self.every:
                continue
            group = judge.groups.get(key)
            pids = sorted({p for m in group.members.values() for p in m.pids}) if group else []
            ranks = tuple(procs[p] for p in pids if p in procs and procs[p].live)
            if not ranks:
                continue
            self._asked[key] = now
            self._running[key] = self._pool.submit(answers, ranks, self.cancel)
        for d in (self._asked, self._up, self._running):
            for key in [k for k in d if k not in stalled]:
                del d[key]

    def up(self, key: str) -> bool | None:
        """1/0 for a stalled job that was asked; None otherwise (no series)."""
        return self._up.get(key)

    def close(self) -> None:
        self.cancel.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
