"""The Watcher's gatherers and explainers: what runs at a stall transition, and how each
record becomes evidence (split from gputui.watch.watcher, which re-exports these names).

A gatherer takes the stalled job (`JobTarget`) and a cancel event, runs its tool bounded and
off the caller's thread, and returns a typed record (a JSON-able dict) or None; it never
raises: its failure is data in the record. An explainer is pure (gputui.diagnose) and turns
a record into Evidence, live or in a replay. Each imports its machinery where first used,
so importing the Watcher costs the dashboard's first frame nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gputui.collect.model import ProcessInfo, Snapshot
from gputui.diagnose.verdict import Verdict

if TYPE_CHECKING:
    from gputui.collect.frames import RankStack
    from gputui.collect.procs.rank_tracker import RankIOTracker
    from gputui.diagnose.evidence import Evidence

AUTO_DUMP_TIMEOUT_S = 5.0  # per rank; py-spy took 10-20 ms on a hung H200 rank
BUSY_LIMIT_S = 600.0  # --busy-limit's default (gputui.diagnose.hang.progress.BUSY_LIMIT_S)

Gather = Callable[["JobTarget", threading.Event], "dict[str, Any] | None"]
Explain = Callable[[dict[str, Any], Verdict, "Snapshot | None"], "Evidence"]


@dataclass(frozen=True)
class JobTarget:
    """The stalled job at its transition, for a gatherer: who to look at, and why now."""

    key: str  # the job's key (Job.key): records name it, so a replay finds its job
    label: str
    trigger: str  # "stalled" | "hung"
    verdict: Verdict
    ranks: tuple[ProcessInfo, ...]  # live local ranks, with create times for the identity check
    gone: tuple[RankStack, ...] = ()  # ranks whose process has exited (Verdict.vanished)
    # where each rank writes (gputui.collect.procs.rank_tracker)
    rankio: RankIOTracker | None = None
    xids: tuple[Any, ...] = ()  # XidEvents known (gputui.collect.nvml.xid): a late rank's pid


def gather_stacks(target: JobTarget, cancel: threading.Event) -> dict[str, Any] | None:
    """py-spy on every local rank of the job, in parallel, each bounded; never raises."""
    from gputui.tools.attach.dumpall import dump_all, stacks_record

    if not target.ranks and not target.gone:
        return None
    t = time.time()
    try:
        ranks = {p.pid: p.rank.rank for p in target.ranks if p.rank is not None}
        res = dump_all(list(target.ranks), ranks=ranks, timeout=AUTO_DUMP_TIMEOUT_S, cancel=cancel)
        return stacks_record(
            res,
            t=t,
            job=target.key,
            trigger=target.trigger,
            processes=target.ranks,
            gone=target.gone,
        )
    except Exception as e:  # a gatherer never raises: its failure is data in the record
        from gputui.collect.frames import RankStack

        failed = [
            RankStack(p.pid, p.rank.rank if p.rank else None, None, "failed", error=str(e)[:200])
            for p in target.ranks
        ]
        return {
            "type": "stacks",
            "t": round(t, 3),
            "job": target.key,
            "trigger": target.trigger,
            "ranks": [r.to_json() for r in [*failed, *target.gone]],
        }


def explain_stacks(record: dict[str, Any], v: Verdict, snap: Snapshot | None) -> Evidence:
    """gputui.diagnose.hang.culprit's explainer, imported at the first stall, not at start-up."""
    from gputui.diagnose.hang.culprit import explain_stacks as explain

    return explain(record, v, snap)


def explain_nccl(record: dict[str, Any], v: Verdict, snap: Snapshot | None) -> Evidence:
    """gputui.diagnose.nccl.ras's explainer, imported when an nccl record is first explained."""
    from gputui.diagnose.nccl.ras import explain_nccl as explain

    return explain(record, v, snap)


def gather_nccl(target: JobTarget, cancel: threading.Event) -> dict[str, Any] | None:
    """The flight recorder triggered, where the job set its pipe (RAS is asked by the
    Watcher's RAS poller from the start of the spin, see gputui.watch.ras_poll)."""
    from gputui.tools.gather.nccl import gather_nccl as gather

    return gather(target, cancel, ras=False)


def gather_lastwords(target: JobTarget, cancel: threading.Event) -> dict[str, Any] | None:
    """Each rank's log tail, error file and kernel lines (gputui.tools.gather.lastwords)."""
    from gputui.tools.gather.lastwords import gather_lastwords as gather

    return gather(target, cancel)


def explain_lastwords(record: dict[str, Any], v: Verdict, snap: Snapshot | None) -> Evidence:
    """Why a rank is gone (gputui.diagnose.gone.explain)."""
    from gputui.diagnose.gone.explain import explain_lastwords as explain

    return explain(record, v, snap)


def explain_progress(record: dict[str, Any], v: Verdict, snap: Snapshot | None) -> Evidence:
    """Whether the rank the others wait for advances (gputui.diagnose.hang.progress)."""
    from gputui.diagnose.hang.progress import explain_progress as explain

    return explain(record, v, snap)


def gather_debugserver(
    target: JobTarget,
    cancel: threading.Event,
    *,
    server: str | None = None,
    dump_dir: str | None = None,
) -> dict[str, Any] | None:
    """Every rank's stack and flight recorder from the job's PyTorch debug server, or its
    newest periodic dump (gputui.collect.nccl.debugserver); None when the job has none."""
    from gputui.collect.nccl.debugserver import gather_debugserver as gather

    return gather(
        target.key, target.trigger, target.ranks, cancel, server=server, dump_dir=dump_dir
    )


def explain_debugserver(record: dict[str, Any], v: Verdict, snap: Snapshot | None) -> Evidence:
    """gputui.diagnose.nccl.debugserver's explainer, imported when first needed."""
    from gputui.diagnose.nccl.debugserver import explain_debugserver as explain

    return explain(record, v, snap)


def explain_blamed_probe(record: dict[str, Any], v: Verdict, snap: Snapshot | None) -> Evidence:
    """The blamed GPU's pair probe (gputui.diagnose.health.blamed_probe): a record no gatherer
    takes; the dashboard's B and `check --probe-blamed` add it (Watcher.add_record)."""
    from gputui.diagnose.health.blamed_probe import explain_blamed_probe as explain

    return explain(record, v, snap)


# Kinds of records that are explained but not gathered at a stall transition.
EXPLAIN_ONLY: tuple[tuple[str, Explain], ...] = (("blamed_probe", explain_blamed_probe),)


def with_debug_server(
    gatherers: tuple[tuple[str, Gather, Explain], ...] | None = None,
    *,
    server: str | None = None,
    dump_dir: str | None = None,
) -> tuple[tuple[str, Gather, Explain], ...]:
    """The gatherers with the debug server's named by --debug-server / --debug-dump-dir."""
    from functools import partial

    base = DEFAULT_GATHERERS if gatherers is None else gatherers
    if server is None and dump_dir is None:
        return base
    bound = partial(gather_debugserver, server=server, dump_dir=dump_dir)
    return tuple((k, bound if k == "debugserver" else g, e) for k, g, e in base)


# Stacks first: the banner's second line is the first finding, and the culprit's frame is
# what a person wants first; RAS and the flight recorder add the ranks of other nodes.
DEFAULT_GATHERERS: tuple[tuple[str, Gather, Explain], ...] = (
    ("stacks", gather_stacks, explain_stacks),
    ("nccl", gather_nccl, explain_nccl),
    ("lastwords", gather_lastwords, explain_lastwords),
    ("debugserver", gather_debugserver, explain_debugserver),
)
