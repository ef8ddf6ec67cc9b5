"""The hang detector: one Verdict per snapshot, from how long each GPU has been spinning.

The rule, in full (thresholds in `classify` and `runs`):

1. Each sample, each GPU is classified (free, idle, spinning, communicating, computing).
   Spinning = util >= 90 %, mem_util <= 1 %, and power <= 25 % of the GPU's own limit.
2. Each GPU's run of continuous spinning is followed (`runs.advance_run`).
3. GPUs are grouped by job (remembering GPUs whose process has exited).
4. A group is *stalled* when one of its GPUs has spun for `stall_after` seconds, *hung*
   after `hang_after`. Its suspects are its GPUs that do not spin: idle ones and those whose
   process vanished first; if there are none, the busy ones; if every GPU spins, none.

The detector is incremental (O(GPUs + jobs) per sample) so the dashboard can run it every
tick in the sampler thread, and pure in the sense that the same snapshots always give the
same verdicts: `gputui check --replay` and the app agree.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputui.collect.model import Snapshot
from gputui.diagnose.classify import GpuState, classify_gpu, describe_state
from gputui.diagnose.groups import Group, GroupMemory
from gputui.diagnose.runs import SpinRun, advance_run
from gputui.diagnose.verdict import HUNG, STALLED, Verdict, next_steps, stall_reason

MAX_GAP_S = 5.0  # spinning samples further apart than this do not make one run


class Detector:
    """Feed it every snapshot in time order; it returns the verdict at that sample."""

    def __init__(self, stall_after: float = 10.0, hang_after: float = 60.0) -> None:
        if stall_after <= 0 or hang_after < stall_after:
            raise ValueError("need 0 < stall_after <= hang_after")
        self.stall_after, self.hang_after = stall_after, hang_after
        self.runs: dict[int, SpinRun] = {}
        self.memory = GroupMemory()
        self.last: Verdict | None = None

    def update(self, snap: Snapshot) -> Verdict:
        states = {g.index: classify_gpu(g) for g in snap.gpus}
        for i, st in states.items():
            run = advance_run(
                self.runs.get(i), snap.t, st, stall_after=self.stall_after, max_gap=MAX_GAP_S
            )
            if run is None:
                self.runs.pop(i, None)
            else:
                self.runs[i] = run
        for i in set(self.runs) - set(states):  # a GPU no longer reported
            del self.runs[i]
        groups = self.memory.update(snap)
        verdicts = [v for g in groups if (v := self._judge(g, snap, states)) is not None]
        words = {i: str(s) for i, s in states.items()}
        if not verdicts:
            reason = _ok_reason(snap, states, self.runs)
            verdict = Verdict(t=snap.t, reason=reason, gpu_states=words)
        else:
            verdicts.sort(key=lambda v: (v.state == HUNG, snap.t - (v.since or snap.t)))
            worst = verdicts[-1]
            others = len(verdicts) - 1
            reason = worst.reason + (f" ({others} other job(s) stalled too.)" if others else "")
            verdict = Verdict(**{**worst.__dict__, "reason": reason, "gpu_states": words})
        self.last = verdict
        return verdict

    def _judge(
        self, group: Group, snap: Snapshot, states: dict[int, GpuState]
    ) -> Verdict | None:
        members = sorted(group.members)
        spinning = tuple(i for i in members if i in self.runs and i in group.present(snap))
        if not spinning:
            return None
        since = min(self.runs[i].since for i in spinning)
        seconds = snap.t - since
        if seconds < self.stall_after:
            return None
        vanished = group.vanished(snap)
        idle = [i for i in members if i not in spinning and i not in vanished and _quiet(states, i)]
        busy = [i for i in members if i not in spinning and i not in vanished and i not in idle]
        suspects = tuple(sorted(idle + list(vanished))) or tuple(busy)
        words = [
            f"GPU {i} " + _suspect_words(i, vanished, states) for i in suspects
        ]
        suspect_pids = tuple(p for i in suspects for p in group.members[i].pids)
        gpu_power = [snap.gpu(i) for i in members]
        power_known = all(g is None or g.power_frac is not None for g in gpu_power)
        hung = seconds >= self.hang_after
        waiting = group.members[spinning[0]].pids
        return Verdict(
            t=snap.t,
            state=HUNG if hung else STALLED,
            spinning=spinning,
            suspects=suspects,
            suspect_pids=suspect_pids,
            vanished=tuple(i for i in suspects if i in vanished),
            reason=stall_reason(
                job=group.label,
                spinning=spinning,
                suspect_words=words,
                seconds=seconds,
                power_known=power_known,
                hung=hung,
                group_size=len(members),
            ),
            next_steps=next_steps(
                suspects=suspects,
                suspect_pids=suspect_pids,
                waiting_pid=waiting[0] if waiting else None,
                vanished=bool(suspects) and all(i in vanished for i in suspects),
                multi_gpu_process=_multi_gpu_process(snap),
            ),
            since=since,
            job=group.label,
            power_known=power_known,
        )


def _suspect_words(i: int, vanished: tuple[int, ...], states: dict[int, GpuState]) -> str:
    if i in vanished:
        return "(its process has exited)"
    return describe_state(states.get(i, GpuState.UNKNOWN))


def _quiet(states: dict[int, GpuState], i: int) -> bool:
    return states.get(i) in (GpuState.IDLE, GpuState.FREE, None)


def _multi_gpu_process(snap: Snapshot) -> bool:
    seen: set[int] = set()
    for g in snap.gpus:
        if seen & set(g.pids):
            return True
        seen |= set(g.pids)
    return False


def _ok_reason(snap: Snapshot, states: dict[int, GpuState], runs: dict[int, SpinRun]) -> str:
    if not snap.gpus:
        return "no GPUs to watch" + (f": {snap.gpu_error}" if snap.gpu_error else "")
    short = [f"GPU {i} {r.length(snap.t):.0f} s" for i, r in sorted(runs.items())]
    if short:
        return "no hang: spinning only briefly so far (" + ", ".join(short) + ")"
    busy = sum(s in (GpuState.COMPUTING, GpuState.COMMUNICATING) for s in states.values())
    return f"no hang: {busy} of {len(states)} GPUs busy, none spinning in a collective"


def diagnose_trace(
    snaps: Iterable[Snapshot], stall_after: float = 10.0, hang_after: float = 60.0
) -> list[Verdict]:
    """The verdict at every sample of a recording (what `gputui check --replay` prints)."""
    det = Detector(stall_after, hang_after)
    return [det.update(s) for s in snaps]
