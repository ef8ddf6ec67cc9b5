"""The hang detector: one Verdict per snapshot, from how long each GPU has been spinning.

The rule, in full (thresholds in `classify` and `runs`):

1. Each sample, each GPU is classified (free, idle, spinning, communicating, computing).
   Spinning = util >= 90 %, mem_util <= 1 %, and power <= 25 % of the GPU's own limit.
2. Each GPU's run of continuous spinning is followed (`runs.advance_run`).
3. GPUs are grouped by job (remembering GPUs whose process has exited).
4. A group is *stalled* when one of its GPUs has spun for `stall_after` seconds, *hung*
   after `hang_after`. Its suspects are all its GPUs that do not spin: idle (stuck on the
   CPU side), busy (never reached the collective) or gone (the rank died). If every GPU of
   the group spins, there is no suspect to name from NVML, and the reason says so.
5. GPUs whose process left are remembered as members while the group stalls, and otherwise
   for `hang_after` seconds; the alarm clears when the group has no spinning GPU left.
6. A job that progresses but whose ranks wait unevenly (one rank, or a few, waiting much
   less than the rest) is `slow` when nothing stalls: gputui.diagnose.slow.straggler.

The detector is incremental (O(GPUs + jobs) per sample) so the dashboard can run it every
tick in the sampler thread, and pure in the sense that the same snapshots always give the
same verdicts: `gputui check --replay` and the app agree.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputui.collect.model import Snapshot
from gputui.collect.pacing import lasted
from gputui.diagnose.hang.classify import GpuState, classify_node, describe_state
from gputui.diagnose.hang.runs import SpinRun, advance_run
from gputui.diagnose.hang.stopped import stopped_words
from gputui.diagnose.job_groups import READINGS_KEY, Group, GroupMemory
from gputui.diagnose.slow.straggler import SPIN_BREAKS_HOLD_S, Straggle, WaitShares
from gputui.diagnose.slow.words import headline
from gputui.diagnose.states import severity
from gputui.diagnose.verdict import HUNG, STALLED, Verdict, next_steps, stall_reason

MAX_GAP_S = 5.0  # spinning samples further apart than this do not make one run
# Each state's word, looked up: str() of a state runs two Python-level calls, for every GPU
# of every sample.
_WORD = {s: str(s) for s in GpuState}


class Detector:
    """Feed it every snapshot in time order; it returns the verdict at that sample."""

    def __init__(self, stall_after: float = 10.0, hang_after: float = 60.0) -> None:
        if stall_after <= 0 or hang_after < stall_after:
            raise ValueError("need 0 < stall_after <= hang_after")
        self.stall_after, self.hang_after = stall_after, hang_after
        self.runs: dict[int, SpinRun] = {}
        self.memory = GroupMemory()
        self.last: Verdict | None = None
        # The verdict of every stalled or hung group at the last sample, by job key (the
        # Verdict above is only the worst). A group of `memory.groups` that is not here is ok.
        # Read by faces that show every job, such as the Prometheus exporter.
        self.job_verdicts: dict[str, Verdict] = {}
        # Wait shares per GPU and each job's Straggle at the last sample (slow jobs, and
        # jobs whose ranks all wait alike): gputui.diagnose.slow.straggler.
        self.waits = WaitShares()
        self.straggles: list[Straggle] = []
        self._states: dict[int, GpuState] = {}  # the classes of the last sample (judge_now)

    def update(self, snap: Snapshot) -> Verdict:
        states = classify_node(snap.gpus)
        self._states = states
        self._advance_runs(states, snap.t)
        groups = self.memory.update(snap)
        self.waits.observe(snap, groups)
        verdicts = []
        self.job_verdicts = {}
        claimed: set[int] = set()  # spinning GPUs already explained by a larger group
        forget = snap.t - self.hang_after
        for g in groups:  # largest first
            found = self._stalled(g, snap) if self.runs else None
            if found is None:
                g.forget_before(forget)
                continue
            spinning, since = found
            # A small group (a notebook's context on a GPU where a rank spins) whose
            # spinning GPUs all belong to a larger stalled job says nothing new.
            if not set(spinning) <= claimed:
                claimed.update(spinning)
                verdicts.append(self._judge(g, snap, states, spinning, since))
                self.job_verdicts[g.key] = verdicts[-1]
        words = {i: _WORD[s] for i, s in states.items()}
        stuck = {i for v in verdicts for i in v.spinning + v.suspects}
        spin = {i for i, r in self.runs.items() if r.length(snap.t) >= SPIN_BREAKS_HOLD_S}
        judged = self.waits.judge(snap, groups, spin)
        self.straggles = (  # a stalled job has no stragglers: its culprit is a suspect
            [s for s in judged if stuck.isdisjoint(s.shares)] if stuck else judged
        )
        shares = {i: x for s in self.straggles for i, x in s.shares.items()}
        waiting = tuple(sorted([i for s in self.straggles for i in s.waiting]))
        slow = [s for s in self.straggles if s.stragglers]
        if not verdicts and slow:
            from gputui.diagnose.slow.why import slow_verdict

            worst_slow = max(slow, key=lambda s: (len(s.shares), -min(s.stragglers)))
            verdict = slow_verdict(worst_slow, snap, shares)
            others = len(slow) - 1
            reason = verdict.reason + (f" ({others} other job(s) slow too.)" if others else "")
            extra = {"reason": reason, "gpu_states": words, "waiting_gpus": waiting}
            verdict = Verdict(**{**verdict.__dict__, **extra})
        elif not verdicts:
            # Every GPU with a process reads its power and limit (else spinning is judged
            # without them, and the reason says so).
            power = all(g.power_frac is not None for g in snap.gpus if g.pids)
            reason = _ok_reason(snap, states, self.runs, self.stall_after, power) + _gone_note(
                groups, snap
            )
            alike = [headline(s) for s in self.straggles if s.alike]
            reason += "".join(f"; {a}" for a in alike)
            verdict = Verdict(
                t=snap.t,
                reason=reason,
                gpu_states=words,
                power_known=power,
                wait_share=shares,
                waiting_gpus=waiting,
            )
        else:
            # The worst group: hung before stalled, then the one with suspects, then the
            # longest stall.
            worst = max(
                verdicts,
                key=lambda v: (severity(v.state), bool(v.suspects), snap.t - (v.since or snap.t)),
            )
            others = len(verdicts) - 1
            reason = worst.reason + (f" ({others} other job(s) stalled too.)" if others else "")
            verdict = Verdict(**{**worst.__dict__, "reason": reason, "gpu_states": words})
        self.last = verdict
        return verdict

    def _advance_runs(self, states: dict[int, GpuState], t: float) -> None:
        """Each GPU's spinning run after this sample (runs.advance_run); a GPU no longer
        reported has none."""
        runs = self.runs
        for i, st in states.items():
            run = runs.get(i)
            if run is None and st is not GpuState.SPINNING:
                continue  # no run, and none starts: advance_run would say None (most GPUs)
            run = advance_run(run, t, st, stall_after=self.stall_after, max_gap=MAX_GAP_S)
            if run is None:
                runs.pop(i, None)
            else:
                runs[i] = run
        if runs:
            for i in set(runs) - set(states):  # a GPU no longer reported
                del runs[i]

    def judge_now(self, key: str, snap: Snapshot) -> Verdict | None:
        """The stalled verdict of job `key` at the last sample (`snap`), before it has spun
        for stall_after: for a caller that holds plain evidence of a rank that makes no
        progress (gputui.watch.watcher's early call). None when none of its GPUs spins now."""
        group = self.memory.groups.get(key)
        if group is None:
            return None
        spinning = tuple(
            sorted(i for i, m in group.members.items() if m.last_seen == snap.t and i in self.runs)
        )
        if not spinning:
            return None
        since = min(self.runs[i].since for i in spinning)
        return self._judge(group, snap, self._states, spinning, since)

    def _stalled(self, group: Group, snap: Snapshot) -> tuple[tuple[int, ...], float] | None:
        """(spinning GPUs, since when) if this group has spun for stall_after, else None."""
        spinning = tuple(
            sorted(i for i, m in group.members.items() if m.last_seen == snap.t and i in self.runs)
        )
        if not spinning:
            return None
        since = min(self.runs[i].since for i in spinning)
        return (spinning, since) if lasted(snap.t - since, self.stall_after) else None

    def _judge(
        self,
        group: Group,
        snap: Snapshot,
        states: dict[int, GpuState],
        spinning: tuple[int, ...],
        since: float,
    ) -> Verdict:
        """The verdict for a stalled group: who spins, who does not, and what to do."""
        present = set(group.present(snap))
        members = sorted(group.members)
        seconds = snap.t - since
        # Every member that does not spin is a suspect: idle (stuck on the CPU side), busy
        # elsewhere (never reached the collective), or gone (the rank died).
        suspects = tuple(i for i in members if i not in spinning)
        vanished = tuple(i for i in suspects if i not in present)
        if group.key == READINGS_KEY:
            words = [f"GPU {i} {_quiet_words(i, vanished, states)}" for i in suspects]
        else:
            words = [
                f"GPU {i} "
                + _owned_by(snap, group.members[i].pids)
                + (
                    stopped_words(snap, group.members[i].pids)  # SIGSTOP, Ctrl-Z: no bug
                    or _suspect_words(i, group, vanished, states)
                )
                for i in suspects
            ]
        suspect_pids = tuple(p for i in suspects for p in group.members[i].pids)
        # Ranks that died beside a rank still on their GPU (ranks sharing a GPU): NVML sees
        # the GPU still in use, so only the pid that left tells.
        gone = tuple(
            (pid, rank) for pid, (_, rank, _) in group.departed.items() if pid not in suspect_pids
        )
        for pid, rank in gone:
            who = f"rank {rank} (pid {pid})" if rank is not None else f"pid {pid}"
            words.append(f"{who} (its process has exited)")
        suspect_pids += tuple(pid for pid, _ in gone)
        live_pids = tuple(p for i in suspects if i not in vanished for p in group.members[i].pids)
        # The power note concerns how *spinning* was judged, so only the spinners count.
        spin_samples = [snap.gpu(i) for i in spinning]
        power_known = all(g is not None and g.power_frac is not None for g in spin_samples)
        hung = lasted(seconds, self.hang_after)
        waiting = group.members[spinning[0]].pids
        reason = stall_reason(
            job=group.label,
            spinning=spinning,
            suspect_words=words,
            seconds=seconds,
            power_known=power_known,
            hung=hung,
            group_size=len(members),
            procs=len({p for m in group.members.values() for p in m.pids}),
        )
        if group.key == READINGS_KEY:
            assumed = f"the file lists no processes: {_gpu_list(members)} taken as one job"
            reason = f"{assumed}; {reason}"
        return Verdict(
            t=snap.t,
            state=HUNG if hung else STALLED,
            spinning=spinning,
            suspects=suspects,
            suspect_pids=suspect_pids,
            vanished=vanished,
            gone=gone,
            reason=reason,
            next_steps=next_steps(
                suspects=suspects,
                suspect_pids=live_pids,
                waiting_pid=waiting[0] if waiting else None,
                vanished=bool(vanished),
                multi_gpu_process=_multi_gpu_process(snap, group),
            ),
            since=since,
            job=group.label,
            power_known=power_known,
            waiting_pid=waiting[0] if waiting else None,
            multi_gpu_process=_multi_gpu_process(snap, group),
        )


def _suspect_words(
    i: int, group: Group, vanished: tuple[int, ...], states: dict[int, GpuState]
) -> str:
    missing = group.members[i].missing_rank
    if missing is not None:
        return (
            f"(no process of local rank {missing} on this node: it exited before it was "
            "seen, or never started)"
        )
    if i in vanished:
        return "(its process has exited)"
    return describe_state(states.get(i, GpuState.UNKNOWN))


def _quiet_words(i: int, vanished: tuple[int, ...], states: dict[int, GpuState]) -> str:
    """A suspect of a file that lists no processes: what its readings say, no more."""
    state = states.get(i, GpuState.UNKNOWN)
    if state in (GpuState.COMPUTING, GpuState.COMMUNICATING, GpuState.UNKNOWN):
        return describe_state(state)
    if i in vanished:
        return "(went quiet: no kernel, no memory held; its rank may have exited)"
    return "(idle: no kernel running; its rank may be stuck on the CPU side)"


def _owned_by(snap: Snapshot, pids: Iterable[int]) -> str:
    """`(pod ml/train-1, pid 815) ` where the suspect's process has an owner (a pod, a
    container, a Slurm job): on a shared node that is the name a person acts on."""
    for pid in pids:
        p = snap.process(pid)
        if p is not None and p.owner is not None:
            return f"({p.owner.short()}, pid {pid}) "
    return ""


def _multi_gpu_process(snap: Snapshot, group: Group) -> bool:
    """A pid of this group on more than one GPU: one process drives several GPUs."""
    seen: set[int] = set()
    for i in group.members:
        g = snap.gpu(i)
        pids = set(g.pids) if g is not None else set()
        if seen & pids:
            return True
        seen |= pids
    return False


def _ok_reason(
    snap: Snapshot,
    states: dict[int, GpuState],
    runs: dict[int, SpinRun],
    stall_after: float,
    power: bool,
) -> str:
    """Why nothing is raised, so a quiet banner is still informative. `power`: every GPU
    with a process reads its power and limit (the caller has worked it out already)."""
    if not snap.gpus:
        return "no GPUs to watch" + (f": {snap.gpu_error}" if snap.gpu_error else "")
    long = [i for i, r in sorted(runs.items()) if lasted(r.length(snap.t), stall_after)]
    if long:
        text = (
            f"no job to judge: {_gpu_list(long)} spin but list no process "
            "(processes of another container or PID namespace are not visible)"
        )
    elif runs:  # the seconds counted toward a stall, so a quiet banner shows it coming
        short = [f"GPU {i} has spun {r.length(snap.t):.0f} s" for i, r in sorted(runs.items())]
        text = f"no hang yet: {', '.join(short)}; a stall is called at {stall_after:g} s"
    else:
        seen = list(states.values())
        busy = seen.count(GpuState.COMPUTING) + seen.count(GpuState.COMMUNICATING)
        text = f"no hang: {busy} of {len(states)} GPUs busy, none spinning in a collective"
    if not power:
        text += "; power or its limit is not reported, so spinning is judged from util and memory"
    return text


def _gone_note(groups: list[Group], snap: Snapshot) -> str:
    """The note on a rank whose process left while the job's other ranks are still here:
    "; rank 1 (pid 1025) has exited while its job runs on". Said while nothing is stalled yet: the
    moment a rank dies, its peers have not spun long enough for a stall (10 s by default),
    and an "OK" that does not say what changed reads as if nothing had."""
    gone = []
    for g in groups:
        members = g.members
        left = [i for i in g.vanished(snap) if members[i].missing_rank is None]
        if not left or not g.present(snap):
            continue
        for i in left:
            m = members[i]
            who = f"rank {m.rank}" if m.rank is not None else f"GPU {i}'s process"
            gone.append(who + (f" (pid {', '.join(map(str, m.pids[:4]))})" if m.pids else ""))
    if not gone:
        return ""
    verb = "has" if len(gone) == 1 else "have"
    more = f" and {len(gone) - 3} more" if len(gone) > 3 else ""
    return f"; {', '.join(gone[:3])}{more} {verb} exited while its job runs on"


def _gpu_list(ix: list[int]) -> str:
    return ("GPU " if len(ix) == 1 else "GPUs ") + ", ".join(map(str, ix))


def diagnose_trace(
    snaps: Iterable[Snapshot], stall_after: float = 10.0, hang_after: float = 60.0
) -> list[Verdict]:
    """The detector's verdict at every sample of a recording, NVML's alone: the pure core's
    one loop (its tests, and gputui.tools.bundle, which sit below gputui.watch). A face
    runs the Watcher instead (gputui.watch.run), which adds the recorded evidence."""
    det = Detector(stall_after, hang_after)
    return [det.update(s) for s in snaps]
