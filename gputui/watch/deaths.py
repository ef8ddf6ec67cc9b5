"""A rank that dies is a fact the moment its process is gone: no stall clock applies.

The detector calls a job stalled once its GPUs have spun for `--stall-after` seconds, and the
Watcher read last words only then: a rank dead of CUDA OOM was quoted 12 s after its exit on
the GPU machine (8 s on CPU), whatever had been said in between. Here the exit itself is the
trigger:

- the sample in which a rank of a job that runs on (a GPU of the job left by its process, or
  a pid that left a GPU it shared) is first missed starts the lastwords gatherer for that job
  at once, off the caller's thread (once per set of gone ranks);
- the job is called stalled once its peers have spun SPIN_S (they wait for the dead rank), or as
  soon as the lastwords record names a cause for the gone rank (a traceback, a signal, the
  OOM killer, an Xid), whether or not its peers spin yet; a replay, which gathers nothing,
  calls it on the recorded lastwords record alone (a recording made without one keeps the
  clock it was made with: the bundled demo is one);
- a rank that leaves with nothing to say while its peers do not spin (the end of a run, an
  elastic scale-down) is no alarm: the ok reason's "has exited while its job runs on" note
  says it, as before.

What is judged is pure: the same records give the same call in a replay (the gatherer's
record carries the words), so the replayed Watcher, which gathers nothing, still calls the
job from the recorded lastwords record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gputui.collect.model import Job, Snapshot
from gputui.diagnose.verdict import STALLED, Verdict

# A GPU whose process left longer ago than this is an old departure, not this death (the
# detector keeps a left GPU for --hang-after when nothing stalls).
RECENT_S = 30.0
# The peers' spin that makes a wordless death plain: NVML averages util over up to a second,
# so at the end of a run a rank that has just finished its last collective can read as
# spinning for a sample while its peer exits; a second and a half of spin is a wait.
SPIN_S = 1.5


def _gone_now(group: Any, snap: Snapshot) -> tuple[tuple[int, ...], tuple[tuple[int, Any], ...]]:
    """(GPUs whose process left recently, (pid, rank) of pids that left a shared GPU)."""
    t = snap.t
    vanished = tuple(
        sorted(
            i
            for i, m in group.members.items()
            if m.last_seen < t and m.missing_rank is None and t - m.last_seen <= RECENT_S
        )
    )
    gone = tuple(
        (pid, rank) for pid, (when, rank, _gpu) in group.departed.items() if t - when <= RECENT_S
    )
    return vanished, gone


def _died(evidence: Any, pids: set[int]) -> bool:
    """The lastwords evidence names a cause for one of these gone pids."""
    extra = getattr(evidence, "extra", None) or {}
    for e in extra.get("ranks") or ():
        if isinstance(e, dict) and e.get("gone") and e.get("cause") and e.get("pid") in pids:
            return True
    return False


class DeathWatch:
    """Per sample: a job that lost a rank has its last words gathered now, and is called as
    soon as the death is plain (peers spin, or a cause is found)."""

    def __init__(self, gather: Callable[[Verdict, Snapshot, Job], None] | None) -> None:
        self._gather = gather  # starts the lastwords gatherer (None: a replay gathers nothing)
        self._asked: dict[str, frozenset[Any]] = {}  # job key -> the gone set gathered for
        # job key -> the verdict that called it: a death stays called while its job is here
        # (for RECENT_S), even where a sample lists the dead pid on its GPU a moment longer.
        self._called: dict[str, Verdict] = {}

    def settled(self) -> bool:
        """No death called: a sample whose listed jobs have every member present and no
        departed pid changes nothing here (a replay's quiet step): poll() drops their
        `_asked` entries and leaves those of jobs no longer listed as they are."""
        return not self._called

    def poll(
        self,
        snap: Snapshot,
        detector: Any,
        newest: Callable[[str, Job, float], dict[str, Any] | None],
        explainers: dict[str, Any],
    ) -> tuple[Verdict, Job] | None:
        """The job's stalled verdict when one of its ranks has died; None otherwise."""
        groups = detector.memory.groups
        if not groups or not snap.jobs:
            self._called.clear()
            return None
        found = None
        here = {job.key for job in snap.jobs}
        self._called = {
            k: v for k, v in self._called.items() if k in here and snap.t - v.t <= RECENT_S
        }
        for job in snap.jobs:
            group = groups.get(job.key)
            if group is None or not group.present(snap):
                continue
            vanished, gone = _gone_now(group, snap)
            if not vanished and not gone:
                self._asked.pop(job.key, None)
                continue
            since = min(
                [group.members[i].last_seen for i in vanished]
                + [group.departed[p][0] for p, _ in gone]
            )
            v0 = _verdict(group, snap, vanished, gone, since)
            key = frozenset([*vanished, *(p for p, _ in gone)])
            if self._asked.get(job.key) != key:
                self._asked[job.key] = key
                if self._gather is not None:
                    self._gather(v0, snap, job)
            if found is not None:
                continue
            # Live, its peers spinning: the death is plain at once. A replay calls it only on
            # the recorded words (below): a recording made without them (older, or the demo)
            # keeps the clock it was made with.
            spinning = [
                i
                for i in group.present(snap)
                if i in detector.runs and detector.runs[i].length(snap.t) >= SPIN_S
            ]
            if spinning and self._gather is not None:
                v = detector.judge_now(job.key, snap)
                if v is not None:
                    found = (v, job)
                    continue
            rec = newest("lastwords", job, since - 5.0) if "lastwords" in explainers else None
            if rec is None:
                continue
            try:
                ev = explainers["lastwords"](rec, v0, snap)
            except Exception:  # noqa: S112 - an explainer's bug: no early call, that is all
                continue
            dog = (getattr(ev, "extra", None) or {}).get("watchdog")
            if isinstance(dog, dict) and dog.get("pids"):
                # The dead waited for a live rank and the NCCL watchdog ended them: the
                # rank they waited for is the suspect (gputui.diagnose.gone.watchdog).
                waited = _waited(group, snap, dog, since)
                if waited is not None:
                    found = (waited, job)
            elif _died(ev, set(v0.suspect_pids)):
                found = (v0, job)
        if found is not None and (found[0].vanished or found[0].gone):
            self._called.setdefault(found[1].key, found[0])
        if found is None:  # called before and its job still here: a death stays called
            held = next((j for j in snap.jobs if j.key in self._called), None)
            if held is not None:
                found = (replace(self._called[held.key], t=snap.t), held)
        return found


def _verdict(
    group: Any,
    snap: Snapshot,
    vanished: tuple[int, ...],
    gone: tuple[tuple[int, Any], ...],
    since: float,
) -> Verdict:
    """The stalled verdict of a job one of whose ranks died while the others do not spin
    (yet): the dead ranks are its suspects; the last words, folded in by the Watcher, say why."""
    from gputui.diagnose.verdict import next_steps

    words = []
    pids: list[int] = []
    for i in vanished:
        m = group.members[i]
        who = f"rank {m.rank} (GPU {i}" if m.rank is not None else f"GPU {i} (its process"
        words.append(who + (f", pid {m.pids[0]})" if m.pids else ")"))
        pids.extend(m.pids)
    for pid, rank in gone:
        words.append(f"rank {rank} (pid {pid})" if rank is not None else f"pid {pid}")
        pids.append(pid)
    verb = "has" if len(words) == 1 else "have"
    label = group.label
    reason = (
        f"{'job ' + label + ': ' if label else ''}stalled: {', '.join(words[:4])} {verb} "
        f"exited {snap.t - since:.0f} s ago while the job runs on."
    )
    return Verdict(
        t=snap.t,
        state=STALLED,
        spinning=(),
        suspects=vanished,
        suspect_pids=tuple(pids),
        vanished=vanished,
        gone=gone,
        reason=reason,
        next_steps=next_steps(
            suspects=vanished,
            suspect_pids=(),
            waiting_pid=None,
            vanished=True,
            multi_gpu_process=False,
        ),
        since=since,
        job=label,
    )


def _waited(group: Any, snap: Snapshot, dog: dict[str, Any], since: float) -> Verdict | None:
    """The stalled verdict of a job whose ranks the NCCL watchdog ended while they waited
    for the ranks still alive: those are its suspects."""
    from gputui.diagnose.gone.watchdog import ranks_words

    pids = {p for p in dog.get("pids") or () if isinstance(p, int)}
    present = set(group.present(snap))
    gpus = tuple(sorted(i for i in present if pids & set(group.members[i].pids)))
    if not gpus:
        return None
    ended = [r for r in dog.get("ended") or () if isinstance(r, int)]
    waited = [r for r in dog.get("waited_for") or () if isinstance(r, int)]
    label = group.label
    reason = (
        f"{'job ' + label + ': ' if label else ''}stalled: {ranks_words(waited)} "
        f"(GPU {', '.join(map(str, gpus))}) is alive while {ranks_words(ended)}, which "
        "waited for it, have exited."
    )
    return Verdict(
        t=snap.t,
        state=STALLED,
        suspects=gpus,
        suspect_pids=tuple(sorted(pids)),
        reason=reason,
        since=since,
        job=label,
    )
