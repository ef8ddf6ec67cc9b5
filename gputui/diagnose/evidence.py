"""What evidence beyond NVML adds to a verdict, and how it is folded in.

An explainer (pure, in this package) turns one typed record (a stack dump, an NCCL RAS
answer...) plus the current verdict into an `Evidence`; `fold` puts every kind's evidence
into the verdict the banner, `check` and the bundle show. Keeping the fold here, apart from
whoever gathers the records (gputui.watch), means a replay that carries the records gives
the same verdict as the live run that took them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gputui.diagnose.ranking import Finding, Strength, rank
from gputui.diagnose.verdict import Verdict


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


def fold(verdict: Verdict, evidence: Sequence[Evidence]) -> Verdict:
    """The verdict with the evidence in it, in the order given (stacks first by convention):
    findings of every kind one after the other, the first culprit frame and stack list, and
    the suspect pids NVML could not name.

    Corroboration: where the stacks name no culprit but another kind (NCCL RAS, the flight
    recorder) names a local rank the others wait for, that rank's stack entry becomes the
    suspect and its frame the culprit's line: the counts say who, the stack says where.
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
    ordered = rank(f for e in evidence for f in e.all_findings())
    return replace(
        verdict,
        findings=tuple(f.text for f in ordered),
        ranked=ordered,
        culprit_frame=culprit,
        stacks=stacks,
        suspect_pids=tuple(pids),
        evidence={e.kind: e.extra for e in evidence if e.extra},
    )


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
