"""The live side of the rendezvous check: the Watcher's helper that finds ranks waiting for
a rank that never came (gputui.diagnose.hang.rendezvous phrases it, from the record this makes).

Per sample it never blocks: a scanner (gputui.collect.procs.hostranks) finds host ranks, and a
worker thread confirms each candidate job once with a py-spy stack of one rank (is it in the
rendezvous?) and the listener on MASTER_ADDR:PORT, again every RECHECK_S while it waits; a
job whose stack is past the rendezvous, or whose ranks compute on a GPU, is not looked at
again. In a replay, the recording's records say it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from gputui.collect.model import Snapshot
from gputui.diagnose.hang.rendezvous import (
    KIND,
    WAIT_S,
    candidates,
    membership,
    verdict_from_record,
)
from gputui.diagnose.verdict import Verdict

if TYPE_CHECKING:
    from gputui.collect.procs.hostranks import HostRank

RECHECK_S = 5.0
RENDEZVOUS_FRAMES = (
    "init_process_group",
    "rendezvous",
    "_store_based_barrier",
    "TCPStore",
    "_create_c10d_store",
    "_env_rendezvous_handler",
    "next_rendezvous",
    "_tcp_rendezvous_handler",
)


def stack_says_rendezvous(pid: int, timeout: float = 5.0) -> tuple[bool | None, str | None]:
    """(in rendezvous?, the frame that says so) from a py-spy dump; (None, why) when no stack."""
    from gputui.tools.attach.stacks import py_spy_dump

    try:
        res = py_spy_dump(pid, timeout=timeout)
    except Exception as e:  # a tool's failure is an answer, not a crash
        return None, str(e)[:200]
    if not res.ok:
        return None, res.message
    # Frames only ("Process N: <command line>" and "Thread ..." lines are not): the call the
    # user made (init_process_group) is named when it is there, else the innermost match.
    frames = [ln.strip() for ln in res.lines if ln[:1].isspace()]
    hits = [s for s in frames if any(f in s for f in RENDEZVOUS_FRAMES)]
    if not hits:
        return False, None
    best = next((s for s in hits if "init_process_group" in s), hits[0])
    return True, best[:200]


def judge_job(key: str, rs: list[HostRank], stacks: bool = True) -> dict[str, Any] | None:
    """A record entry for a job whose ranks are in the rendezvous, else None (blocking:
    one py-spy dump, one socket listing; run off the caller's thread).

    Without stacks (--no-auto-dump: nothing attaches), only a job on one node (its master
    is local) with ranks missing is named: that much is certain from the environment."""
    from gputui.collect.procs.hostranks import listeners
    from gputui.collect.this_host import is_this_host

    inside: bool | None = None
    frame: str | None = None
    why: str | None = "stacks are off (--no-auto-dump)"
    for r in rs[:2] if stacks else ():
        inside, said = stack_says_rendezvous(r.pid)
        if inside is not None:
            frame = said
            break
        why = said
    if inside is False:
        return None
    master_addr = next((r.master_addr for r in rs if r.master_addr), None)
    if inside is None and not (is_this_host(master_addr) and membership(key, rs)["missing_count"]):
        return None
    port = next((r.master_port for r in rs if r.master_port), None)
    ls: list[list[Any]] = []
    if port is not None:
        import psutil

        for pid, addr in listeners(port)[:8]:
            name = None
            if pid is not None:
                try:
                    name = psutil.Process(pid).name()
                except psutil.Error:
                    name = None
            ls.append([pid, addr, name])
    agent = {"pid": rs[0].pid, "nnodes": rs[0].nnodes} if rs[0].nnodes is not None else None
    return {
        **membership(key, rs),
        "agent": agent,
        "master_addr": master_addr,
        "master_port": port,
        "master_local": is_this_host(master_addr),
        "listeners": ls,
        "frame": frame,
        "no_stack": why if inside is None else None,
    }


class RendezvousWatch:
    """Per sample, never blocking: the rendezvous verdict, and a record when it changes.

    Live, a scanner finds host ranks and a worker thread confirms candidates (one stack,
    one socket listing per job, again every RECHECK_S while it waits); a job whose stack is
    past the rendezvous is not looked at again. In a replay, the recording's records say it.
    """

    def __init__(
        self, live: bool, hang_after: float = 60.0, wait_s: float = WAIT_S, stacks: bool = True
    ) -> None:
        self.live, self.stacks = live, stacks
        self.hang_after, self.wait_s = hang_after, wait_s
        # The host's processes are read only live: a replay's records carry them, and
        # psutil and the host's addresses are not imported for it (a replay starts sooner).
        self.scanner = None
        if live:
            from gputui.collect.procs.hostranks import HostRankScanner

            self.scanner = HostRankScanner()
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._judged: dict[str, dict[str, Any]] = {}  # job -> entry, while it waits
        self._passed: set[str] = set()  # jobs whose stack was past the rendezvous
        self._checked: dict[str, float] = {}  # job -> when last confirmed (monotonic)
        self._busy = False
        self._record: dict[str, Any] | None = None
        self._said: Any = ()  # nothing to say until a job is found: no record at start

    def settled(self) -> bool:
        """A replay with no rendezvous record read: every sample without records answers
        (None, None) and changes nothing (a replay's quiet step)."""
        return not self.live and self._record is None

    def update(self, snap: Snapshot) -> tuple[Verdict | None, dict[str, Any] | None]:
        """(the verdict, or None; a new record to keep, or None)."""
        if not self.live:
            for rec in snap.records:
                if rec.get("type") == KIND:
                    self._record = rec
            if self._record is None:
                return None, None
            return verdict_from_record(self._record, snap.t, self.hang_after), None
        assert self.scanner is not None
        self.scanner.poke()
        ranks = self.scanner.ranks()
        if not ranks and not self._judged and not self._said:
            return None, None  # no rank on this host, none waiting, nothing said: no work
        # A rank computing on a GPU is past its rendezvous: no stack is taken of its job.
        computing = {p for g in snap.gpus if (g.util or 0) > 0 for p in g.pids}
        jobs = candidates(ranks, time.time(), self.scanner.started, self.wait_s)
        for k, rs in jobs.items():
            if any(r.pid in computing for r in rs):
                self._passed.add(k)
        jobs = {k: rs for k, rs in jobs.items() if k not in self._passed}
        self._confirm(jobs)
        with self._lock:
            for k in [k for k in self._judged if k not in jobs]:
                del self._judged[k]  # left the rendezvous, or its ranks exited
            entries = [{**self._judged[k], **membership(k, jobs[k])} for k in sorted(self._judged)]
        said = tuple((e["job"], tuple(e["missing_ranks"]), len(e["here"])) for e in entries)
        new = None
        if said != self._said:
            self._said = said
            new = {"type": KIND, "t": round(snap.t, 3), "jobs": entries}
        if not entries:
            return None, new
        return verdict_from_record({"jobs": entries}, snap.t, self.hang_after), new

    def _confirm(self, jobs: dict[str, list[HostRank]]) -> None:
        if self._busy or not jobs:
            return
        now = time.monotonic()
        due = {k: rs for k, rs in jobs.items() if now - self._checked.get(k, -1e9) >= RECHECK_S}
        if not due:
            return
        self._busy = True
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gputui-rdzv")
        try:
            self._pool.submit(self._run, due)
        except RuntimeError:
            self._busy = False

    def _run(self, due: dict[str, list[HostRank]]) -> None:
        try:
            for key, rs in due.items():
                self._checked[key] = time.monotonic()
                try:
                    entry = judge_job(key, rs, self.stacks)
                except Exception:  # a check that breaks must not stop the watch
                    entry = None
                with self._lock:
                    if entry is None:
                        self._passed.add(key)
                        self._judged.pop(key, None)
                    else:
                        self._judged[key] = entry
        finally:
            self._busy = False

    def wait_idle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._busy and time.monotonic() < deadline:
            time.sleep(0.02)
        return not self._busy

    def close(self) -> None:
        if self.scanner is not None:
            self.scanner.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
