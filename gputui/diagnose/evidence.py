"""What evidence beyond NVML adds to a verdict, and how it is folded in.

An explainer (pure, in this package) turns one typed record (a stack dump, an NCCL RAS
answer...) plus the current verdict into an `Evidence`; `fold` puts every kind's evidence
into the verdict the banner, `check` and the bundle show. Keeping the fold here, apart from
whoever gathers the records (gputui.watch.watcher), means a replay that carries the records gives
the same verdict as the live run that took them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gputui.diagnose.collective_mismatch import joined_mismatch
from gputui.diagnose.ranking import Finding, Strength, rank, strongest
from gputui.diagnose.verdict import Known, Verdict, next_steps


@dataclass(frozen=True)
class Evidence:
    """One kind of evidence about the stalled job, in the verdict's words."""

    kind: str  # the record's type: "stacks", "nccl", ...
    findings: tuple[str, ...] = ()  # sentences, most important first
    culprit_frame: str | None = None  # the suspect's innermost user frame, `func (file:line)`
    stacks: tuple[dict[str, Any], ...] = ()  # check --json's per-rank stack entries
    # Local processes this evidence names as the ones the others wait for (NCCL's rank
    # behind, the flight recorder's missing rank, the stacks' suspect). NVML names suspects
    # by GPU; these add the ranks it cannot tell apart (every GPU spins, or ranks share one).
    suspect_pids: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # check --json adds it under `kind`
    # Findings with their strength (gputui.diagnose.ranking). A source that only fills
    # `findings` (plain sentences) has them ranked as CONTEXT.
    ranked: tuple[Finding, ...] = ()

    def all_findings(self) -> tuple[Finding, ...]:
        plain = tuple(Finding(t, Strength.CONTEXT, self.kind) for t in self.findings)
        known = {f.text for f in self.ranked}
        return self.ranked + tuple(f for f in plain if f.text not in known)


def fold(verdict: Verdict, evidence: Sequence[Evidence], known: Known | None = None) -> Verdict:
    """The verdict with the evidence in it: every finding ranked strongest first, the
    headline (`reason`) from the strongest, the culprit's frame, and the suspect pids NVML
    could not name.

    The detector's own sentence is the NVML finding: it stays the headline until a finding
    beats it (a mismatch of collectives, a culprit's line, RAS's ranks behind...). `findings`
    holds the evidence's sentences strongest first (the NVML sentence is in `ranked` only,
    where it is not the headline's already). `culprit_frame` is the frame of the strongest
    finding that has one, else an explainer's, else the corroborated one.

    Corroboration: where the stacks name no culprit but another kind (NCCL RAS, the flight
    recorder) names a local rank the others wait for, that rank's stack entry becomes the
    suspect and its frame the culprit's line: the counts say who, the stack says where.

    Args:
        verdict: the detector's verdict for the job.
        evidence: each kind's Evidence (stacks, nccl, health, lastwords...), in any order.
        known: what the evidence so far says, so that the next steps never ask for what is done;
            None: worked out from `evidence`.

    Returns:
        A new Verdict with the findings ranked, the headline, the culprit's frame and the suspects
        filled in.
    """
    if not evidence:
        return verdict
    stacks = next((e.stacks for e in evidence if e.stacks), ())
    culprit = next((e.culprit_frame for e in evidence if e.culprit_frame), None)
    named = [p for e in evidence if e.kind != "stacks" for p in e.suspect_pids]
    if culprit is None and named and stacks:
        stacks, culprit = _corroborate(stacks, named)
    pids = list(verdict.suspect_pids)
    for p in [p for e in evidence for p in e.suspect_pids]:
        if p not in pids:
            pids.append(p)
    found = _without_said_gone([f for e in evidence for f in e.all_findings()])
    joined = joined_mismatch(found, stacks, [e.extra for e in evidence])
    if joined is not None:  # each rank's collective and line, from every source: it leads
        found = [joined, *found]
    ordered = rank([*found, *disagreements(found)])  # a disagreement after the sources
    nvml = Finding(verdict.reason, Strength.NVML, "nvml") if verdict.reason else None
    top = strongest(ordered)
    framed = next((f.frame for f in ordered if f.frame and f.strength > Strength.NVML), None)
    frame = framed or culprit
    k = _known(known, evidence, ordered, stacks, frame)
    return replace(
        verdict,
        reason=top.lead if top is not None else verdict.reason,
        findings=tuple(f.text for f in ordered),
        ranked=rank([*ordered, nvml] if nvml is not None else ordered),
        culprit_frame=frame,
        stacks=stacks,
        suspect_pids=tuple(pids),
        evidence={e.kind: e.extra for e in evidence if e.extra},
        next_steps=_steps(verdict, k, tuple(pids), stacks),
    )


GONE_WORDS = "is gone: its process exited"


def _without_said_gone(found: list[Finding]) -> list[Finding]:
    """The findings, less the stacks' "rank N is gone: its process exited" for a rank whose
    cause a stronger finding already says (its last words, its Xid): who, said twice."""
    told = {p for f in found if f.strength >= Strength.RANK_GONE for p in f.pids}
    # A rank gone before it was seen has no pid in the stacks: its GPU says who.
    gone = [f for f in found if f.strength >= Strength.RANK_GONE and f.source != "stacks"]
    told_gpus = {g for f in gone for g in f.gpus}
    if not told and not told_gpus:
        return found
    return [
        f
        for f in found
        if not (
            f.source == "stacks"
            and f.text.endswith(GONE_WORDS)
            and (set(f.pids) & told or (not f.pids and set(f.gpus) & told_gpus))
        )
    ]


def _known(
    known: Known | None,
    evidence: Sequence[Evidence],
    ordered: Sequence[Finding],
    stacks: tuple[dict[str, Any], ...],
    frame: str | None,
) -> Known:
    """What the evidence says is done or found, for the next steps."""
    k = known or Known()
    mismatch = next((f for f in ordered if f.strength == Strength.MISMATCH), None)
    sites = None
    if mismatch is not None:
        sites = mismatch.lead.split(": ", 1)[-1]
    culprit = next((f for f in ordered if f.strength == Strength.CULPRIT_LINE and f.frame), None)
    fr = any(e.extra.get("flightrec") is not None for e in evidence)  # on, even if it failed
    return replace(
        k,
        dumped=k.dumped or any(s.get("outcome") == "done" for s in stacks),
        flight_recorder=k.flight_recorder or fr,
        mismatch=k.mismatch or sites,
        culprit=k.culprit or (culprit.frame if culprit else None) or (None if sites else frame),
        culprit_pid=k.culprit_pid or (culprit.pids[0] if culprit and culprit.pids else None),
    )


def _steps(
    v: Verdict, k: Known, pids: tuple[int, ...], stacks: tuple[dict[str, Any], ...]
) -> tuple[str, ...]:
    gone = {p for p, _ in v.gone} | {s.get("pid") for s in stacks if s.get("outcome") == "gone"}
    return next_steps(
        suspects=v.suspects,
        suspect_pids=tuple(p for p in pids if p not in gone),
        waiting_pid=v.waiting_pid,
        vanished=bool(v.vanished),
        multi_gpu_process=v.multi_gpu_process,
        known=k,
    )


def disagreements(found: Sequence[Finding]) -> list[Finding]:
    """A sentence for each pair of sources whose strongest finding names different ranks.

    Both findings stay (nothing is thrown away); this one says they disagree, at the weaker
    one's strength so it sits right above it.
    """
    best: dict[str, Finding] = {}
    for f in rank(found):
        if f.strength > Strength.NVML and f.ranks and f.source not in best:
            best[f.source] = f
    out = []
    items = list(best.values())
    for i, a in enumerate(items):
        for b in items[i + 1 :]:
            if set(a.ranks) & set(b.ranks):
                continue
            weak = b if b.strength <= a.strength else a
            strong = a if weak is b else b
            out.append(
                Finding(
                    f"sources disagree: {_src(strong)} {_rk(strong)}, {_src(weak)} {_rk(weak)}",
                    weak.strength,
                    "ranking",
                    ranks=tuple(sorted({*a.ranks, *b.ranks})),
                )
            )
    return out


def _src(f: Finding) -> str:
    """The source as the subject of a sentence, with its verb."""
    names = {
        "stacks": "the stacks name",
        "ras": "NCCL RAS names",
        "nccl": "NCCL RAS names",
        "flightrec": "the flight recorder names",
    }
    return names.get(f.source, f"{f.source} names")


def _rk(f: Finding) -> str:
    return ("rank " if len(f.ranks) == 1 else "ranks ") + ",".join(map(str, f.ranks))


def _corroborate(
    stacks: tuple[dict[str, Any], ...], named: list[int]
) -> tuple[tuple[dict[str, Any], ...], str | None]:
    """The stack entries with the named ranks as suspects, and the first one's frame."""
    out, culprit = [], None
    for e in stacks:
        if e.get("pid") in named and e.get("outcome") == "done":
            e = {**e, "role": "suspect"}
            culprit = culprit or e.get("frame")
        out.append(e)
    return tuple(out), culprit
