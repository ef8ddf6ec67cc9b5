"""Progress is not a hang: whether the rank its peers wait for advances, and what it does.

A stall is not always a hang. A rank that writes a checkpoint, compiles, evaluates on rank
0 or waits on a slow file system leaves its peers spinning in a collective for tens of
seconds to minutes, and NVML sees exactly the picture of a hang. What tells them apart is
on the node: the suspect's CPU time, its bytes read and written, and whether its Python
frames move (gputui.tools.gather.progress samples them into `progress` records).

The rule (docs/hang-detector.md, "Busy, not stuck"), judged only on the ranks outside the
collective (the verdict's suspects), never on the waiting ranks, whose NCCL proxy threads
and Python wait loop burn CPU while they spin:

- bytes moving is progress: at least BYTES_MIN over the window, at BYTES_MIN_RATE or more
  (read_bytes/write_bytes, or rchar/wchar for a tmpfs, a pipe or a socket: the larger);
- CPU time is progress only with frames that move: at least CPU_MIN cores over the window
  AND a dump in the window found its main thread in other functions than the dump before
  (lines are not compared: py-spy sees a `while True: pass` on either of its two lines). A
  busy-wait loop burns a whole core in the same function at every dump: stuck, not busy;
- ...or with the stack standing still inside a library's call (the innermost Python frame
  not the rank's own: a long native call such as torch.save's CRC and write of a large state
  dict, seen on 4 x H200): that work advances where Python cannot see it;
- frames that move without CPU time (a sleep loop that wakes to poll) are not progress.

A job is busy when every live suspect advances, none is gone, and no stronger evidence (a
gone rank, a sick GPU, ranks in different collectives) says otherwise. Busy is no alarm, for
at most `--busy-limit` seconds (default 600, the NCCL watchdog's default timeout): past it
the verdict is stalled or hung again, with the reason. Pure: the record carries the readings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from gputui.diagnose.evidence import Evidence
from gputui.diagnose.hang.children import child_sentence
from gputui.diagnose.hang.progress_signs import (
    _CHECKPOINT,
    _COMPILE,
    _EVAL,
    CPU_MIN,
    _child,
    _cores,
    _delta,
    _dumps,
    _flushing,
    _held,
    _in_native_work,
    _rate_words,
    _readings,
    _stirred,
    _strs,
    _stuck_words,
    _text,
)
from gputui.diagnose.hang.threads import holder_sentence
from gputui.diagnose.ranking import Finding, Strength, strongest
from gputui.diagnose.verdict import BUSY, Verdict

KIND = "progress"
BUSY_LIMIT_S = 600.0  # --busy-limit's default: the NCCL watchdog's default timeout (10 min)
WINDOW_S = 10.0  # readings this far back judge "advances now"
MIN_SPAN_S = 1.5  # fewer seconds of readings than this: not judged yet
# The names of a main thread at work on I/O: without one of them in its recent dumps, bytes
# that only a socket or pipe moved (rchar/wchar, no storage bytes) are another thread's.
_IO = re.compile(
    r"read|write|recv|send|save|load|pickle|serializ|copy|upload|download|flush|fetch|"
    r"socket|request|urlopen|dump|open|put|get_batch|_next_data|__next__",
    re.I,
)
BYTES_MIN = 1 << 20  # 1 MiB moved in the window ...
BYTES_MIN_RATE = 256 * 1024  # ... at 256 KiB/s or more (a heartbeat's bytes are far below)
MAX_RANKS = 64
EARLY_S = 5.0  # plain evidence of a rank that makes no progress: the verdict from here on


@dataclass(frozen=True)
class RankProgress:
    """One suspect's progress over the window: advancing True/False, or None (not judged)."""

    pid: int
    rank: int | None
    gpu: int | None
    advancing: bool | None
    what: str | None = None  # "writes a checkpoint", "reads", "computes on the CPU ..."
    rate: str | None = None  # "82 MB/s", "1.0 CPU cores"
    for_s: float = 0.0  # since the first reading of this episode
    frame: str | None = None  # the user frame of the last dump
    why: str = ""  # the stuck rank's words: "no bytes moved and its stack stands still"
    cores: float | None = None  # CPU over the window, in cores
    # The stuck rank's cause, fit for a headline: "rank 1 spins in poll_ready (train.py:40),
    # 1.0 core, nothing advances", or the side thread that holds the GIL; None when asleep.
    cause: str | None = None
    cause_frame: str | None = None  # the line to change: the spin's, the holder's, the child's
    steady: bool = False  # the cause is the stacks' own sentence (a holder, a child): said once

    def who(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"

    def sentence(self) -> str:
        """ "rank 0 writes a checkpoint: save_checkpoint (train.py:88), 82 MB/s for 40 s"."""
        at = f": {self.frame}," if self.frame else ","
        return f"{self.who()} {self.what}{at} {self.rate} for {self.for_s:.0f} s"

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "pid": self.pid,
            "gpu": self.gpu,
            "advancing": self.advancing,
            "what": self.what,
            "rate": self.rate,
            "for_s": round(self.for_s, 1),
            "frame": self.frame,
            "why": self.why or None,
            "cores": None if self.cores is None else round(self.cores, 2),
            "cause": self.cause,
            "cause_frame": self.cause_frame,
            "steady": self.steady,
        }


def judge_rank(e: dict[str, Any]) -> RankProgress | None:
    """One rank entry of a progress record, judged; None when the entry is unreadable."""
    pid = e.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return None
    rank = e.get("rank") if isinstance(e.get("rank"), int) else None
    gpu = e.get("gpu") if isinstance(e.get("gpu"), int) else None
    rs = _readings(e)
    first = next(iter(_readings(e, "first")), rs[0] if rs else None)
    dumps = _dumps(e)
    frame = next((_text(d.get("frame")) for d in reversed(dumps) if d.get("frame")), None)
    base = RankProgress(pid, rank, gpu, None, frame=frame)
    if len(rs) < 2:
        return base
    last = rs[-1]
    t_end = last[0] or 0.0
    window = [r for r in rs if (r[0] or 0.0) >= t_end - WINDOW_S]
    start = window[0] if len(window) >= 2 else rs[-2]
    span = t_end - (start[0] or 0.0)
    since = (first[0] or 0.0) if first is not None else (rs[0][0] or 0.0)
    for_s = max(0.0, t_end - since)
    if span < MIN_SPAN_S:
        return replace(base, for_s=for_s)
    wrote = _delta(start, last, 3, 5)  # write_bytes, wchar
    read = _delta(start, last, 2, 4)  # read_bytes, rchar
    cpu = _delta(start, last, 1) / span
    names = " ".join(
        [n for d in dumps[-3:] for n in _strs(d.get("functions"))]
        + [f for d in dumps[-3:] if isinstance(f := d.get("frame"), str)]
    )
    moved = wrote + read
    if (
        dumps
        and _delta(start, last, 2) + _delta(start, last, 3) < BYTES_MIN
        and not _IO.search(names)
    ):
        # Only socket or pipe bytes (rchar/wchar), and the main thread is nowhere near I/O:
        # a background thread's traffic (NCCL's socket proxy receives what the peers send:
        # 0.3 MB/s on 4 x H200 while the rank spun in its own loop), not the rank's progress.
        moved = 0.0
    if moved < BYTES_MIN or moved / span < BYTES_MIN_RATE:
        # Bytes moved earlier in this spin and it now waits in the kernel for them (a sync
        # after the write): still the same phase, said at its rate over the whole spin.
        whole = max(1e-9, t_end - since)
        if first is not None and _flushing(e):
            wrote, read = _delta(first, last, 3, 5), _delta(first, last, 2, 4)
            moved, span = wrote + read, whole
    if moved >= BYTES_MIN and moved / span >= BYTES_MIN_RATE:
        if wrote >= read:
            what = "writes a checkpoint" if _CHECKPOINT.search(names) else "writes"
            rate = _rate_words(wrote / span)
        else:
            what, rate = "reads", _rate_words(read / span)
        return replace(base, advancing=True, what=what, rate=rate, for_s=for_s)
    t_window = t_end - WINDOW_S
    held = _held(dumps, t_window)
    if held is not None:
        # Another thread holds the GIL in one place while the main thread stands still:
        # whatever CPU it burns, nothing the job waits for advances.
        held_by = holder_sentence(base.who(), *held)
        why = f"{held_by.split(': ', 1)[1]}; CPU time in one place is not progress"
        return replace(
            base,
            advancing=False,
            for_s=for_s,
            why=why,
            cores=cpu,
            cause=held_by,
            cause_frame=held[1],
            steady=True,
        )
    stirred = _stirred(dumps, t_window, names)
    native = _in_native_work(dumps, t_window)
    if cpu >= CPU_MIN and native is not None and not stirred:
        # One long call into a library's native code (torch.save's CRC and write of a large
        # state dict, a C++ compile step): the Python stack stands still by nature.
        if _CHECKPOINT.search(names):
            what = "writes a checkpoint"
        elif _COMPILE.search(names):
            what = "compiles on the CPU"
        else:
            what = f"works in native code under {native}"
        rate = f"{cpu:.1f} CPU core{'s' if round(cpu, 1) != 1.0 else ''}"
        return replace(base, advancing=True, what=what, rate=rate, for_s=for_s)
    if cpu >= CPU_MIN and stirred:
        if _COMPILE.search(names):
            what = "compiles on the CPU"
        elif _EVAL.search(names):
            what = "evaluates on the CPU"
        else:
            what = "computes on the CPU (compile, evaluation...)"
        rate = f"{cpu:.1f} CPU core{'s' if round(cpu, 1) != 1.0 else ''}"
        return replace(base, advancing=True, what=what, rate=rate, for_s=for_s)
    why = _stuck_words(cpu, dumps, t_window)
    out = replace(base, advancing=False, for_s=for_s, why=why, cores=cpu)
    child = _child(dumps, t_window)
    if child is not None:  # it waits on a child that is stuck in its own code
        role, pid, at, line = child
        cause = child_sentence(role, base.who(), pid, at, line)
        return replace(out, cause=cause, cause_frame=at, steady=True)
    if cpu >= CPU_MIN and frame is not None:
        cause = f"{base.who()} spins in {frame}, {_cores(cpu)}, nothing advances"
        return replace(out, cause=cause, cause_frame=frame)
    return out


def explain_progress(record: dict[str, Any], verdict: Verdict, snap: Any) -> Evidence:
    """Each judged rank; a CONTEXT finding for a suspect that makes no progress (the busy
    verdict itself is made by `busy_verdict`, which knows the limit)."""
    ranks = record.get("ranks")
    if not isinstance(ranks, list):
        return Evidence(KIND, findings=("the progress record could not be read",))
    judged = [j for e in ranks[:MAX_RANKS] if isinstance(e, dict) for j in (judge_rank(e),) if j]
    suspects = set(verdict.suspect_pids)
    found = []
    for j in judged:
        if j.advancing is False and j.pid in suspects:
            # With a cause (a spin, a GIL holder, a stuck child) it is the culprit's line,
            # said at once from the dumps the poller already took; asleep, the stacks say
            # where. A holder's or a child's sentence is the stacks' own: said once.
            stuck = f"{j.who()} (pid {j.pid}) makes no progress: {j.why}"
            found.append(
                Finding(
                    j.cause if j.steady and j.cause else stuck,
                    Strength.CULPRIT_LINE if j.cause else Strength.CONTEXT,
                    KIND,
                    ranks=(j.rank,) if j.rank is not None else (),
                    pids=(j.pid,),
                    frame=j.cause_frame if j.cause else None,
                    headline=j.cause,
                )
            )
    extra = {"ranks": [j.to_json() for j in judged]}
    return Evidence(KIND, ranked=tuple(found), extra=extra)


def judged(evidence: Evidence | None) -> dict[int, RankProgress]:
    """pid -> its judgement, from the progress evidence's extra."""
    out: dict[int, RankProgress] = {}
    if evidence is None:
        return out
    for r in evidence.extra.get("ranks") or ():
        if isinstance(r, dict) and isinstance(r.get("pid"), int):
            out[r["pid"]] = RankProgress(
                r["pid"],
                r.get("rank"),
                r.get("gpu"),
                r.get("advancing"),
                r.get("what"),
                r.get("rate"),
                float(r.get("for_s") or 0.0),
                r.get("frame"),
                r.get("why") or "",
                r.get("cores"),
                r.get("cause"),
                r.get("cause_frame"),
                r.get("steady") is True,
            )
    return out


def busy_phase(v: Verdict, evidence: list[Evidence], snap: Any) -> RankProgress | None:
    """The suspect that advances, when every live suspect of the stalled job advances, none
    is gone, and nothing stronger than the stacks' culprit line says otherwise; else None."""
    if not v.alarm or v.vanished or v.gone or not v.suspect_pids:
        return None
    prog = next((e for e in evidence if e.kind == KIND), None)
    if prog is None:
        return None
    top = strongest([f for e in evidence if e.kind != KIND for f in e.all_findings()])
    if top is not None and top.strength >= Strength.MISMATCH:
        return None  # a gone rank, a sick GPU, different collectives: not a busy phase
    by_pid = judged(prog)
    alive = {p.pid for p in getattr(snap, "processes", ()) if p.live} if snap else set()
    live = [p for p in v.suspect_pids if not alive or p in alive]
    if not live or any(p not in by_pid or by_pid[p].advancing is not True for p in live):
        return None
    phase = max((by_pid[p] for p in live), key=lambda j: j.for_s)
    # "for 40 s": as long as its peers have waited, from the spin's first sample
    spun = v.t - v.since if v.since is not None else 0.0
    return replace(phase, for_s=max(phase.for_s, spun))


def busy_verdict(v: Verdict, phase: RankProgress, progress: dict[str, Any]) -> Verdict:
    """The stalled verdict made busy: no alarm, said with what the rank does and its rate."""
    text = phase.sentence()
    spin = ", ".join(map(str, v.spinning))
    steps = (
        f"Nothing to do while it advances: its peers (GPU {spin}) wait in a collective until "
        "it is done. The alarm comes if it stops advancing, or after --busy-limit.",
    )
    return replace(
        v,
        state=BUSY,
        reason=text,
        findings=(),
        ranked=(Finding(text, Strength.CONTEXT, KIND, ranks=_r(phase), pids=(phase.pid,)),),
        culprit_frame=None,
        stacks=(),
        next_steps=steps,
        evidence={KIND: progress},
        busy={**_busy_json(phase)},
    )


def past_limit(phase: RankProgress, limit: float) -> Evidence:
    """A busy phase that never ends is an alarm: the finding that says why, leading like a
    culprit's line (its words steady; the seconds are in the headline and `busy`)."""
    head = f"busy for {phase.for_s:.0f} s, past --busy-limit ({limit:.0f} s): {phase.sentence()}"
    text = f"{phase.who()} {phase.what} past --busy-limit ({limit:.0f} s)" + (
        f": {phase.frame}" if phase.frame else ""
    )
    f = Finding(
        text, Strength.CULPRIT_LINE, KIND, ranks=_r(phase), pids=(phase.pid,), headline=head
    )
    return Evidence("busy_limit", ranked=(f,))


def _r(phase: RankProgress) -> tuple[int, ...]:
    return (phase.rank,) if phase.rank is not None else ()


def _busy_json(phase: RankProgress) -> dict[str, Any]:
    """check --json's `busy`: {rank, pid, gpu, what, rate, for_s, frame}."""
    return {
        "rank": phase.rank,
        "pid": phase.pid,
        "gpu": phase.gpu,
        "what": phase.what,
        "rate": phase.rate,
        "for_s": round(phase.for_s, 1),
        "frame": phase.frame,
    }


def busy_json(phase: RankProgress) -> dict[str, Any]:
    return _busy_json(phase)


def no_progress(evidence: Evidence | None, pids: tuple[int, ...]) -> bool:
    """Every one of `pids` was judged, none advances, and none burns CPU (the plain case for
    an early call). A rank that burns CPU may be in a phase the window has not yet proved
    (torch.save's first seconds pickle in one call, before any byte is written): the early
    rule never calls it stalled; the ordinary judgement at --stall-after does, with its
    cause, when it is a spin."""
    by_pid = judged(evidence)
    return bool(pids) and all(p in by_pid and _plainly_still(by_pid[p]) for p in pids)


def _plainly_still(j: RankProgress) -> bool:
    return j.advancing is False and (j.cores is None or j.cores < CPU_MIN)
