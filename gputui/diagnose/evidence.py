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

from gputui.diagnose.verdict import Verdict


@dataclass(frozen=True)
class Evidence:
    """One kind of evidence about the stalled job, in the verdict's words."""

    kind: str  # the record's type: "stacks", "nccl", ...
    findings: tuple[str, ...] = ()  # sentences, most important first
    culprit_frame: str | None = None  # the suspect's innermost user frame, `func (file:line)`
    stacks: tuple[dict[str, Any], ...] = ()  # check --json's per-rank stack entries
    extra: dict[str, Any] = field(default_factory=dict)  # check --json adds it under `kind`


def fold(verdict: Verdict, evidence: Sequence[Evidence]) -> Verdict:
    """The verdict with the evidence in it, in the order given (stacks first by convention):
    findings of every kind one after the other, the first culprit frame and stack list."""
    if not evidence:
        return verdict
    return replace(
        verdict,
        findings=tuple(f for e in evidence for f in e.findings),
        culprit_frame=next((e.culprit_frame for e in evidence if e.culprit_frame), None),
        stacks=next((e.stacks for e in evidence if e.stacks), ()),
        evidence={e.kind: e.extra for e in evidence if e.extra},
    )
