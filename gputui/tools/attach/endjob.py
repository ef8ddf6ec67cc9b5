"""The way out of a hang: end every rank of one job on this node, so the scheduler restarts it.

A hung NCCL job holds its GPUs until its timeout (10 minutes by default, or never); once its
evidence is saved (the incident bundle), ending it is what a person does next. This does it
safely: only processes that are ranks of that job (a rank number in their environment, a pid
of the job), each still the very process the person saw (pid and create time), SIGTERM to
all, then SIGKILL to those still there after a grace period. Never anything else: a pid
reused by another process, a process of another job, a process without a rank are refused.
The UI asks first, naming the pids, and only after the bundle is written
(gputui.ui.actions.process).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import psutil

from gputui.collect.model import Job, ProcessInfo
from gputui.tools.attach.ptrace import Target, preflight

GRACE_S = 10.0  # SIGTERM first; what is left after this gets SIGKILL
_POLL_S = 0.1


@dataclass
class EndResult:
    """What happened to each rank: ended by SIGTERM or SIGKILL, refused, or not signalled."""

    job: str
    ended: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)  # needed SIGKILL
    refused: list[str] = field(default_factory=list)  # "pid N: why"
    left: list[int] = field(default_factory=list)  # still running at the end (cancelled)

    @property
    def ok(self) -> bool:
        return not self.refused and not self.left and bool(self.ended or self.killed)

    def summary_lines(self) -> list[str]:
        ended = sorted(self.ended + self.killed)
        head = f"job {self.job}: {len(ended)} rank(s) ended"
        if self.killed:
            head += f" ({len(self.killed)} needed SIGKILL)"
        return [head, *self.refused, *([f"still running: {self.left}"] if self.left else [])]


def ranks_here(job: Job, processes: Sequence[ProcessInfo]) -> list[ProcessInfo]:
    """The job's live ranks on this node: its pids that carry a rank, nothing else.

    Args:
        job: the job.
        processes: the sample's processes.

    Returns:
        The ProcessInfos of its ranks here, in rank order.
    """
    pids = set(job.pids)
    return [p for p in processes if p.pid in pids and p.live and p.rank is not None]


def end_ranks(
    job: Job,
    ranks: Sequence[ProcessInfo],
    *,
    grace: float = GRACE_S,
    on_line: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> EndResult:
    """SIGTERM every rank, then SIGKILL the ones left after `grace` seconds. Never raises.

    Args:
        job: the job to end.
        ranks: its live ranks on this node (ranks_here).
        grace: seconds between SIGTERM and SIGKILL.
        on_line: called with a line per step; None: none.
        cancel: set to stop waiting (the ranks already signalled stay signalled).

    Returns:
        The EndResult: which ranks ended, which needed SIGKILL, which were refused.
    """
    say = on_line or (lambda _s: None)
    res = EndResult(job.label)
    procs: dict[int, psutil.Process] = {}
    for p in ranks:
        why = _refuse(job, p)
        if why is not None:
            res.refused.append(f"pid {p.pid}: {why}")
            say(f"pid {p.pid}: not signalled: {why}")
            continue
        try:
            proc = psutil.Process(p.pid)
            proc.send_signal(signal.SIGTERM)
            procs[p.pid] = proc
            say(f"pid {p.pid} (rank {p.rank.rank if p.rank else '?'}): SIGTERM")
        except psutil.NoSuchProcess:
            res.ended.append(p.pid)
        except psutil.Error as e:
            res.refused.append(f"pid {p.pid}: {type(e).__name__} (run gputui as its user)")
    deadline = time.monotonic() + grace
    while procs and time.monotonic() < deadline and not (cancel and cancel.is_set()):
        for pid, proc in list(procs.items()):
            if not _alive(proc):
                res.ended.append(pid)
                say(f"pid {pid}: ended")
                del procs[pid]
        if procs:
            time.sleep(_POLL_S)
    if cancel is not None and cancel.is_set():
        res.left = sorted(procs)
        return res
    for pid, proc in procs.items():
        try:
            proc.send_signal(signal.SIGKILL)
            say(f"pid {pid}: still there after {grace:g} s: SIGKILL")
            proc.wait(timeout=5)
            res.killed.append(pid)
        except psutil.NoSuchProcess:
            res.ended.append(pid)
        except (psutil.Error, psutil.TimeoutExpired) as e:
            res.left.append(pid)
            say(f"pid {pid}: {type(e).__name__}")
    return res


def _refuse(job: Job, p: ProcessInfo) -> str | None:
    """Why not to signal `p`: not a rank of this job, or no longer the process seen."""
    if p.pid not in job.pids:
        return "not a process of this job"
    if p.rank is None:
        return "not a rank (no RANK in its environment)"
    if p.pid in (1, 2) or p.ppid == 2:
        return "a system process"
    problem = preflight(Target.of(p))
    return problem[1] if problem is not None else None


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
