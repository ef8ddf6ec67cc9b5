"""What the detector concludes at one sample, and the advice that goes with it.

The Verdict is the one object the banner, `gputui check` and the incident bundle show, so
it carries its own words: a one-sentence reason and next steps drawn from practice with NCCL
hangs. Nothing here looks at NVML; it only phrases what `detector` found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gputui.diagnose.states import ALARMS, State

# The states by their old names (every rule imports them from here); what each one means to
# each face is the one table in gputui.diagnose.states.
OK, STALLED, HUNG = State.OK, State.STALLED, State.HUNG
SLOW = State.SLOW  # a job that progresses but waits on a straggler (gputui.diagnose.slow.straggler)
# Peers spin while the rank outside the collective advances (writes a checkpoint, compiles,
# evaluates): no alarm, until --busy-limit (gputui.diagnose.hang.progress).
BUSY = State.BUSY

# An age in a sentence ("died 14 s ago", "(41 min ago, before gputui started)") grows at
# every sample; `check --json` prints a line when what a verdict says changes, not its age.
_AGE = re.compile(r"\b\d+(?:\.\d+)? ?(?:s|min|h|d) ago\b")


@dataclass(frozen=True)
class Verdict:
    """The node's state at sample time `t`: the worst group, its spinning and suspect GPUs."""

    t: float
    state: str = OK  # a State (gputui.diagnose.states); a plain word when read from a file
    spinning: tuple[int, ...] = ()  # GPUs of the stuck group that spin in a collective
    suspects: tuple[int, ...] = ()  # GPUs of that group that do not: the likely culprits
    suspect_pids: tuple[int, ...] = ()  # their processes (a dead rank's pid included)
    vanished: tuple[int, ...] = ()  # suspect GPUs whose process has gone
    gone: tuple[tuple[int, int | None], ...] = ()  # (pid, rank) that left a GPU still in use
    reason: str = ""
    next_steps: tuple[str, ...] = ()
    since: float | None = None  # sample time the spinning began
    job: str | None = None  # label of the stuck job
    gpu_states: dict[int, str] = field(default_factory=dict)
    power_known: bool = True  # False: judged from util and mem_util alone
    # What evidence beyond NVML says (stack dumps, NCCL RAS, the flight recorder), filled in
    # by gputui.watch.watcher after the detector: the suspect's innermost user frame, sentences
    # in the order a person should read them, and the per-rank stack entries of `check --json`.
    culprit_frame: str | None = None
    findings: tuple[str, ...] = ()
    stacks: tuple[dict[str, Any], ...] = ()
    # Anything else an evidence kind reports, by kind (e.g. {"nccl": {...}}): check --json
    # prints each under its kind's own key.
    evidence: dict[str, Any] = field(default_factory=dict)
    # The findings with strength and source, strongest first (gputui.diagnose.ranking);
    # `findings` holds their sentences in the same order.
    ranked: tuple[Any, ...] = ()
    # A slow job (state SLOW): the GPUs that hold it back, every judged GPU's wait share
    # (fraction of its busy samples in the collective-wait pattern; ok verdicts carry them
    # too), and why the straggler is slow (gputui.diagnose.slow.why). A hung job has none.
    stragglers: tuple[int, ...] = ()
    wait_share: dict[int, float] = field(default_factory=dict)
    slow_why: dict[str, Any] = field(default_factory=dict)
    # GPUs that wait for a peer in at least half their samples (with hysteresis: see
    # straggler.WaitShares). When this set changes `check --json` prints a line, so that
    # `gputui merge` sees the shares of a node whose ranks all wait for another node.
    waiting_gpus: tuple[int, ...] = ()
    # The detector's inputs to the next steps, kept so that arriving evidence can redo them
    # with what is then known (gputui.diagnose.evidence.fold).
    waiting_pid: int | None = None
    multi_gpu_process: bool = False
    # A busy job (state BUSY): the rank its peers wait for, and what it does: {rank, pid,
    # gpu, what, rate, for_s, frame} (gputui.diagnose.hang.progress); check --json's `busy`.
    busy: dict[str, Any] = field(default_factory=dict)

    @property
    def alarm(self) -> bool:
        """A hang (stalled or hung). A slow job is no alarm: it progresses."""
        return self.state in ALARMS

    def key(self) -> tuple[Any, ...]:
        """What `gputui check --json` reports a change of: the state, who spins and who is
        suspected, and the arrival of evidence (a stack dump changes the culprit frame and
        the findings), so the line that carries the dump is printed when it comes."""
        return (
            self.state,
            self.spinning,
            self.suspects,
            self.culprit_frame,
            tuple(_AGE.sub("ago", f) for f in self.findings),  # an age is no news
            self.stragglers,
            self.waiting_gpus,
            # A busy rank: who and what it does, not its rate (which changes every reading).
            (self.busy.get("rank"), self.busy.get("pid"), self.busy.get("what")),
        )

    def to_json(self) -> dict[str, Any]:
        """Everything, for the incident bundle's verdict.json."""
        return {
            **verdict_to_json(self),
            "vanished": list(self.vanished),
            "power_known": self.power_known,
            "gpu_states": {str(i): s for i, s in sorted(self.gpu_states.items())},
        }


def verdict_to_json(v: Verdict) -> dict[str, Any]:
    """The line `gputui check --json` prints: the documented keys first, extras after.

    Once evidence has come (a stack dump of the stalled job), the line also carries
    `findings`, `culprit_frame` (the suspect's user frame, or null) and `stacks` (one entry
    per local rank), and each other evidence kind's own key.
    """
    d: dict[str, Any] = {
        "t": round(v.t, 3),
        "state": v.state,
        "spinning": list(v.spinning),
        "suspects": list(v.suspects),
        "reason": v.reason,
        "suspect_pids": list(v.suspect_pids),
        "since": None if v.since is None else round(v.since, 3),
        "job": v.job,
        "next_steps": list(v.next_steps),
        "stragglers": list(v.stragglers),
    }
    if v.wait_share:
        d["wait_share"] = {str(i): round(s, 3) for i, s in sorted(v.wait_share.items())}
    if v.slow_why:
        d["why_slow"] = v.slow_why
    if v.busy:
        d["busy"] = dict(v.busy)
    if v.ranked:
        d["ranked"] = [f.to_json() for f in v.ranked]
    if v.findings or v.stacks or v.culprit_frame:
        d["findings"] = list(v.findings)
        d["culprit_frame"] = v.culprit_frame
        d["stacks"] = [dict(s) for s in v.stacks]
    for kind, extra in v.evidence.items():
        d.setdefault(kind, extra)  # never over a documented key
    return d


def _gpus(ix: tuple[int, ...] | list[int]) -> str:
    return ("GPU " if len(ix) == 1 else "GPUs ") + ", ".join(map(str, ix))


@dataclass(frozen=True)
class Known:
    """What the evidence gathered so far says, so the advice never asks for what is done:
    the ranks' stacks are in, the flight recorder is on, the call sites of a mismatch, the
    culprit's line and its pid."""

    dumped: bool = False
    flight_recorder: bool = False
    mismatch: str | None = None  # "rank 0 in broadcast (train.py:53), rank 1 in ..."
    culprit: str | None = None  # `func (file:line)`
    culprit_pid: int | None = None


FR = (
    "PyTorch's flight recorder (TORCH_FR_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1; "
    "older torch: TORCH_NCCL_TRACE_BUFFER_SIZE) records the last collectives of every rank"
)


def next_steps(
    *,
    suspects: tuple[int, ...],
    suspect_pids: tuple[int, ...],
    waiting_pid: int | None,
    vanished: bool,
    multi_gpu_process: bool,
    known: Known | None = None,
) -> tuple[str, ...]:
    """Advice in the order a person on the node would act on it, given what is known."""
    k = known or Known()
    steps: list[str] = []
    if k.mismatch:
        steps.append(
            f"The ranks called different collectives ({k.mismatch}): read those call sites "
            "and the branch that sends the ranks down different paths (a condition on the "
            "rank, a data-dependent branch, an exception caught on one rank only)."
        )
    if k.culprit:
        pid = k.culprit_pid if k.culprit_pid is not None else (suspect_pids or (None,))[0]
        again = f"`gputui dump {pid}`" if pid is not None else "`gputui dump PID`"
        steps.append(
            f"The culprit is at {k.culprit}: {again} shows it again (is it still there, or "
            "moving?); n adds native frames, g a gdb/cuda-gdb backtrace."
        )
    elif suspect_pids:
        pid = suspect_pids[0]
        steps.append(
            f"Python stack of the suspect: select it (j) and press p, or `gputui dump {pid}`; "
            "n adds native frames, g a gdb/cuda-gdb backtrace."
        )
    if vanished:
        steps.append(
            "A rank has exited: find why in its log (an exception, the OOM killer in "
            "`dmesg`, or a bus error: a container needs a larger `--shm-size` for data "
            "loader workers)."
        )
    if k.dumped:
        pass  # every local rank's stack is in the findings already
    elif waiting_pid is not None:
        steps.append(
            f"Compare with a waiting rank: `gputui dump --job {waiting_pid}` dumps every rank "
            "at once and groups identical stacks (a in the dashboard); the odd rank stands out."
        )
    elif not suspects:
        steps.append("Dump every rank at once (a) and look for the group that is elsewhere.")
    if k.flight_recorder:
        steps.append(
            "Next run: NCCL_DEBUG=INFO shows which collective each rank entered (the flight "
            "recorder is on already)."
        )
    else:
        steps.append(f"Next run: NCCL_DEBUG=INFO shows which collective each rank entered; {FR}.")
    steps.append(
        "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 with a shorter init_process_group(timeout=...) "
        "makes the job fail instead of hanging for the default 10 minutes."
    )
    if multi_gpu_process:
        steps.append(
            "One process drives several GPUs: NCCL_LAUNCH_MODE=GROUP avoids a launch-order "
            "deadlock between its GPUs."
        )
    return tuple(steps)


def stall_reason(
    *,
    job: str | None,
    spinning: tuple[int, ...],
    suspect_words: list[str],
    seconds: float,
    power_known: bool,
    hung: bool,
    group_size: int,
    procs: int = 1,
) -> str:
    """One sentence: who spins, for how long, and who does not (the suspects)."""
    who = f"job {job}: " if job else ""
    spin = (
        f"{_gpus(spinning)} {'has' if len(spinning) == 1 else 'have'} been spinning in a "
        f"collective (util ~100%, no memory traffic"
        + (", idle power" if power_known else "")
        + f") for {seconds:.0f} s"
    )
    if suspect_words:
        tail = "; not spinning: " + ", ".join(suspect_words)
    elif group_size > 1:
        tail = (
            "; every GPU of the job spins, so no single suspect can be named from NVML: the "
            "missing peer is on another node, or the ranks entered different collectives; "
            "dump all ranks and compare their stacks"
        )
    elif procs > 1:
        # Several ranks on one GPU (MPS, oversubscribed jobs): NVML sees one GPU for all.
        tail = (
            f"; its {procs} local ranks share that GPU, so NVML cannot tell which one the "
            "others wait for: their stacks and NCCL's counts can"
        )
    else:
        tail = "; its peers are not on this node's GPUs, so look at the other nodes"
    note = ""
    if not power_known:
        note = " (power or its limit is not reported: judged from util and memory activity)"
    verb = State.HUNG.upper() if hung else State.STALLED.value
    return f"{who}{verb}: {spin}{tail}.{note}"
