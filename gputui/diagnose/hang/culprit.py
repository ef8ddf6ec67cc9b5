"""The culprit's line of Python: what a stack dump of every local rank says about a stall.

NVML tells which GPU does not spin; the stacks tell what its rank is doing instead. This
module reads a `{"type": "stacks"}` record (see gputui.collect.frames) against the current
verdict and says, most important first:

- where each suspect is: its innermost frame of *user* code (`rank 1 (pid 908) is in
  load_next_batch_stuck (train.py:32)`), skipping torch, the standard library, installed
  packages, `<frozen ...>` and native frames when a user frame exists, because the line a
  person can change is in their own code;
- where the waiting ranks are: the collective they sit in and the user line that entered it
  (`ranks 0,2,3 wait in all_reduce (train.py:44)`);
- when the waiting ranks stand at different collective call sites: "ranks entered
  different collectives", with every site. When every local rank spins, NVML has no suspect
  to name, and this mismatch is the answer only the stacks can give;
- a rank that is gone, and a dump that failed: why, and the one fix (the tool layer's
  messages already say it: ptrace refused, py-spy missing...).

Pure: no tools, no processes; the same record gives the same words live and in a replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gputui.collect.frames import Frame, RankStack, rank_stacks_of_record
from gputui.collect.model import Snapshot
from gputui.diagnose.evidence import GONE_WORDS, Evidence
from gputui.diagnose.hang.children import stuck_child
from gputui.diagnose.hang.stack_reading import Reading, read_stack, user_chain
from gputui.diagnose.hang.threads import rank_holder, side_json
from gputui.diagnose.ranking import Finding, Strength
from gputui.diagnose.verdict import Verdict

KIND = "stacks"
SUSPECT, WAITING = "suspect", "waiting"

# ---------------------------------------------------------------- the explainer


@dataclass(frozen=True)
class _Rank:
    stack: RankStack
    reading: Reading
    role: str
    outcome: str  # the record's, or "gone" when the verdict says its GPU's process left
    # Where its path parted from the other waiting ranks' (see _diverge), when it did.
    line: Frame | None = None

    def where(self) -> str | None:
        """The collective and the user line that tells this rank apart: `synchronize
        (train.py:178)` rather than the helper all ranks share (`sync (train.py:158)`)."""
        if self.line is not None and self.reading.collective is not None:
            return f"{self.reading.collective} ({self.line.site()})"
        return self.reading.where()

    def site(self) -> Frame | None:
        return self.line or self.reading.site


def explain_stacks(record: dict[str, Any], verdict: Verdict, snap: Snapshot | None) -> Evidence:
    """Findings, culprit frame and check --json stack entries from a stacks record."""
    try:
        stacks = list(rank_stacks_of_record(record))
    except ValueError as e:
        return _context(f"the stack dump could not be read: {e}")
    dumped = {s.pid for s in stacks}
    stacks = [
        *stacks,
        *(
            RankStack(pid, rank, None, "gone", error="its process exited before the dump")
            for pid, rank in verdict.gone
            if pid not in dumped
        ),
    ]
    ranks = _diverge(_shared_gpus([_judge(s, verdict) for s in stacks]))
    ranked = _findings(ranks, _all_ranks_here(record, snap, len(ranks)))
    suspects = sorted((r for r in ranks if r.role == SUSPECT), key=_order)
    culprit = next(
        (_cause_frame(r) for r in suspects if r.outcome == "done" and _cause_frame(r)),
        None,
    )
    return Evidence(
        KIND,
        findings=tuple(f.text for f in ranked),
        ranked=tuple(ranked),
        culprit_frame=culprit,
        suspect_pids=tuple(r.stack.pid for r in suspects if r.stack.pid is not None),
        stacks=tuple(_entry(r) for r in ranks),
        extra={},
    )


def _judge(s: RankStack, v: Verdict) -> _Rank:
    outcome = s.outcome
    if (s.gpu is not None and s.gpu in v.vanished) or s.pid in {p for p, _ in v.gone}:
        outcome = "gone"  # a stack from before it died is not where it is now
    reading = read_stack(s.frames) if outcome == "done" else Reading(None, None, None)
    if s.gpu is not None and s.gpu in v.suspects:
        role = SUSPECT
    elif s.gpu is not None and s.gpu in v.spinning:
        role = WAITING
    elif outcome == "done":
        role = WAITING if reading.collective else SUSPECT
    else:
        role = SUSPECT if outcome == "gone" else WAITING
    return _Rank(s, reading, role, outcome)


def _shared_gpus(ranks: list[_Rank]) -> list[_Rank]:
    """Where ranks share a spinning GPU, the one outside any collective is the suspect.

    NVML sees one GPU for all of them (MPS, oversubscribed jobs, or two "nodes" on one GPU),
    so it names no suspect; but a rank standing in user code while a rank on the same GPU
    waits in a collective is the one the others wait for. One rank alone on a spinning GPU
    stays waiting: collectives are asynchronous, so its Python may be past the call.
    """
    by_gpu: dict[int, list[_Rank]] = {}
    for r in ranks:
        if r.role == WAITING and r.outcome == "done" and r.stack.gpu is not None:
            by_gpu.setdefault(r.stack.gpu, []).append(r)
    promote: set[int] = set()
    for on_gpu in by_gpu.values():
        inside = [r for r in on_gpu if r.reading.collective]
        outside = [r for r in on_gpu if not r.reading.collective and r.reading.frame]
        if inside and outside:
            promote.update(id(r) for r in outside)
    return [replace(r, role=SUSPECT) if id(r) in promote else r for r in ranks]


def _diverge(ranks: list[_Rank]) -> list[_Rank]:
    """Waiting ranks at one call site whose paths into it differ get the frame where they part.

    With NCCL a collective returns at once and every rank's Python waits in the same helper
    (`sync()` -> `torch.cuda.synchronize()`), so the innermost user line is the same for
    ranks that called different collectives: on 4 x H200 all four stood at `sync
    (multi_worker.py:158)`, reached from `train_step` on ranks 0-2 and `broadcast_step` on
    rank 3. The frames all ranks share, innermost first, are dropped; the first one left is
    each rank's line.
    """
    waiting = [r for r in ranks if r.role == WAITING and r.outcome == "done" and r.reading.site]
    if len(waiting) < 2 or len({r.reading.where() for r in waiting}) != 1:
        return ranks
    chains = {id(r): user_chain(r.stack.frames) for r in waiting}
    depth = 0
    while all(len(c) > depth for c in chains.values()) and (
        len({c[depth].label() for c in chains.values()}) == 1
    ):
        depth += 1
    if not all(len(c) > depth for c in chains.values()):
        return ranks  # one path is a prefix of another: nothing tells them apart
    return [replace(r, line=chains[id(r)][depth]) if id(r) in chains else r for r in ranks]


def _entry(r: _Rank) -> dict[str, Any]:
    """One `check --json` stack entry (docs/commands/check.md shows its keys)."""
    gone = r.outcome == "gone"
    return {
        "pid": r.stack.pid,
        "rank": r.stack.rank,
        "gpu": r.stack.gpu,
        "role": r.role,
        "outcome": r.outcome,
        "frame": r.reading.frame.label() if r.reading.frame else None,
        "collective": r.reading.collective,
        "line": line.label() if (line := r.site()) else None,
        "stack": [] if gone else [f.label() for f in r.stack.frames],
        "error": None if r.outcome == "done" else _why(r),
        **_side_entries(r.stack, gone),
    }


def _side_entries(s: RankStack, gone: bool) -> dict[str, Any]:
    """The rank's other threads and children for its `check --json` stack entry."""
    return {} if gone else side_json(s)


def _order(r: _Rank) -> tuple[int, int, int]:
    s = r.stack
    return (s.rank if s.rank is not None else 1 << 30, s.gpu or 0, s.pid or 0)


def _ranks_words(rs: Sequence[_Rank]) -> str:
    """`rank 1`, `ranks 0,2,3`, or pids where ranks are unknown."""
    known = [r.stack.rank for r in rs if r.stack.rank is not None]
    pids = [str(r.stack.pid) for r in rs if r.stack.rank is None and r.stack.pid is not None]
    parts = []
    if known:
        parts.append(("rank " if len(known) == 1 else "ranks ") + ",".join(map(str, known)))
    if pids:
        parts.append(("pid " if len(pids) == 1 else "pids ") + ",".join(pids))
    if not parts:
        parts.append(rs[0].stack.who())
    return " and ".join(parts)


def _all_ranks_here(record: dict[str, Any], snap: Snapshot | None, n: int) -> bool:
    """Whether the dump holds every rank of the job (its world size is known and reached)."""
    job = next((j for j in (snap.jobs if snap else ()) if j.key == record.get("job")), None)
    world = getattr(job, "world_size", None)
    return isinstance(world, int) and 0 < world <= n


def _context(text: str) -> Evidence:
    return Evidence(KIND, findings=(text,), ranked=(Finding(text, Strength.CONTEXT, KIND),))


def _finding(
    text: str,
    strength: Strength,
    rs: Sequence[_Rank],
    frame: str | None = None,
    headline: str | None = None,
) -> Finding:
    """A stacks Finding about some ranks, with their ranks, pids and GPUs."""
    return Finding(
        text,
        strength,
        KIND,
        ranks=tuple(r.stack.rank for r in rs if r.stack.rank is not None),
        gpus=tuple(r.stack.gpu for r in rs if r.stack.gpu is not None),
        pids=tuple(r.stack.pid for r in rs if r.stack.pid is not None),
        frame=frame,
        headline=headline,
    )


def _mismatch(sites: dict[str, list[_Rank]]) -> Finding:
    """Ranks at different collective call sites: the strongest thing stacks can say.

    The odd group (the fewest ranks; on a tie the last, i.e. the higher ranks) is the one
    the finding names, and its call site is the frame: with two groups of one rank there
    is no telling who is wrong, but either line is where a person starts reading.
    """
    groups = list(sites.items())
    where, odd = min(reversed(groups), key=lambda kv: len(kv[1]))
    site = odd[0].site()
    frame = site.label() if site is not None else None
    if all(r.reading.collective == "synchronize" for rs in sites.values() for r in rs):
        # NCCL: the collective returned at once and Python waits in synchronize, so the
        # stacks know each rank's line, not its collective (RAS and the flight recorder do).
        said = ", ".join(
            f"{_ranks_words(rs)} at {line.site() if (line := rs[0].site()) else w}"
            for w, rs in groups
        )
        return _finding(
            "ranks stopped at different lines (each in synchronize after NCCL calls, which "
            "return at once; NCCL RAS or the flight recorder names the collectives): " + said,
            Strength.MISMATCH,
            odd,
            frame=frame,
            headline="ranks stopped at different lines (in synchronize): " + said,
        )
    said = ", ".join(f"{_ranks_words(rs)} in {w}" for w, rs in groups)
    return _finding(
        "ranks entered different collectives: " + said,
        Strength.MISMATCH,
        odd,
        frame=frame,
        headline="ranks in different collectives: " + said,
    )


def _findings(ranks: list[_Rank], all_here: bool = False) -> list[Finding]:
    """What the stacks say, each with its strength: a mismatch of call sites (MISMATCH), a
    suspect outside any collective at a known line (CULPRIT_LINE), the rest CONTEXT."""
    ranks = sorted(ranks, key=_order)
    suspects = [r for r in ranks if r.role == SUSPECT]
    waiting = [r for r in ranks if r.role == WAITING and r.outcome == "done"]
    failed = [r for r in ranks if r.outcome not in ("done", "gone")]
    out: list[Finding] = []

    def context(text: str, rs: Sequence[_Rank]) -> None:
        out.append(_finding(text, Strength.CONTEXT, rs))

    # Waiting ranks by the collective call site they stand at.
    sites: dict[str, list[_Rank]] = {}
    elsewhere: list[_Rank] = []
    for r in waiting:
        where = r.where()
        if where is None:
            elsewhere.append(r)
        else:
            sites.setdefault(where, []).append(r)
    mismatch = len(sites) > 1
    if mismatch:
        out.append(_mismatch(sites))
    for r in suspects:
        if r.outcome == "gone":
            # Who, not why: a rank's last words (another source) say why, more strongly.
            text = f"{r.stack.who()} {GONE_WORDS}"
            out.append(_finding(text, Strength.CULPRIT_LINE, [r]))
        elif r.outcome == "done" and (cause := _cause(r)) is not None:
            out.append(cause)
        elif r.outcome == "done" and r.reading.frame is not None:
            label = r.reading.frame.label()
            text = f"{r.stack.who()} is in {label}"
            out.append(_finding(text, Strength.CULPRIT_LINE, [r], frame=label))
    if not mismatch:
        for where, rs in sites.items():
            verb = "waits" if len(rs) == 1 else "wait"
            line = f"{_ranks_words(rs)} {verb} in {where}"
            if not suspects and len(rs) > 1 and not elsewhere and not failed:
                if all_here:  # e.g. a sync point after collectives that differ: NCCL can tell
                    line += ": every rank of the job is here at the same line, so the stacks "
                    line += "cannot say who is behind"
                else:
                    line += ": every local rank is in the same collective, so the rank they "
                    line += "wait for is on another node"
            context(line, rs)
    for r in elsewhere:
        if r.reading.frame is not None:
            context(f"{r.stack.who()} is in {r.reading.frame.label()} while its GPU spins", [r])
    for text, rs in _failure_sentences(failed):
        context(text, rs)
    return out


def _cause(r: _Rank) -> Finding | None:
    """A suspect's cause outside its main thread: the side thread that holds the GIL
    (gputui.diagnose.hang.threads), or the child it waits for that is stuck in its own code
    (gputui.diagnose.hang.children). Either is the line to change, so it leads."""
    who = f"rank {r.stack.rank}" if r.stack.rank is not None else r.stack.who()
    holder = rank_holder(r.stack)
    if holder is not None:
        text = holder.words(who, r.reading.collective)
        label = holder.frame.label()
        return _finding(text, Strength.CULPRIT_LINE, [r], frame=label)
    child = stuck_child(r.stack)
    if child is not None:
        text = child.words(who, r.reading.frame)
        f = _finding(text, Strength.CULPRIT_LINE, [r], frame=child.frame.label())
        return replace(f, pids=(*f.pids, child.child.pid))
    return None


def _cause_frame(r: _Rank) -> str | None:
    """The culprit frame of a suspect: its holder's or stuck child's, else its own line."""
    holder = rank_holder(r.stack)
    if holder is not None:
        return holder.frame.label()
    child = stuck_child(r.stack)
    if child is not None:
        return child.frame.label()
    return r.reading.frame.label() if r.reading.frame else None


def _why(r: _Rank) -> str:
    """Why a rank has no stack, with the one thing to do (from the tool layer's message)."""
    s, err = r.stack, (r.stack.error or "").strip()
    if r.outcome == "gone":
        return err or "its process exited"
    if r.outcome == "timeout":
        what = f"py-spy gave no stack in time ({err})" if err else "py-spy gave no stack in time"
        hint = f"gputui dump --gdb {s.pid}" if s.pid is not None else "gputui dump --gdb PID"
        return f"{what}: the process may be in the kernel (state D); try `{hint}`"
    return err or r.outcome


def _failure_sentences(failed: list[_Rank]) -> list[tuple[str, list[_Rank]]]:
    """One sentence per distinct reason, so "py-spy missing" on 8 ranks is said once."""
    by_reason: dict[tuple[str, str], list[_Rank]] = {}
    for r in failed:
        by_reason.setdefault((r.outcome, _generic(_why(r), r.stack.pid)), []).append(r)
    out = []
    for (_outcome, generic), rs in by_reason.items():
        text = _why(rs[0]) if len(rs) == 1 else generic
        out.append((f"{_ranks_words(rs)}: no stack: {text}", rs))
    return out


def _generic(text: str, pid: int | None) -> str:
    """A message with its pid taken out, so the same reason on several ranks groups."""
    if pid is None:
        return text
    return (
        text.replace(f"process {pid}", "the process")
        .replace(f"pid {pid}", "its pid")
        .replace(f"--gdb {pid}", "--gdb PID")
        .replace(f"-CONT {pid}", "-CONT PID")
    )
