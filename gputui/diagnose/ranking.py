"""One ranking of evidence, strongest first: the single place that decides what a person reads.

Every source of evidence (NVML samples, GPU health, rank logs and exits, the rendezvous,
stack dumps, NCCL RAS, the flight recorder, PyTorch's debug server) turns what it read into
`Finding`s, each with a `Strength`. `rank()` orders them; the verdict's headline (`reason`)
is the strongest finding's sentence, and every face (dashboard banner, `check`, `snapshot`,
`bundle`, the exporter, `merge`) shows that order and never re-ranks.

Why these levels, strongest first:

- HARDWARE: the GPU under a rank failed (a hardware Xid, a lost GPU, an uncorrectable memory
  error). Nothing the program does explains it away; the node needs draining.
  Example: "rank 1 (GPU 1) hit Xid 79: GPU fell off the bus; drain the node".
- RANK_GONE: a rank is gone (or erred) and we know why: its last words, the OOM killer, a
  segfault, a program's Xid 31/43 on a healthy GPU, or it never joined the rendezvous.
  Example: "rank 1 died: CUDA error: an illegal memory access (Xid 31 on GPU 1)".
- MISMATCH: ranks entered different collectives, or stand at different sequence numbers
  (stacks, the flight recorder, RAS). Example: "ranks in different collectives: rank 0 in
  broadcast (train.py:53), rank 1 in all_reduce (train.py:57)".
- CULPRIT_LINE: one rank stands outside any collective at a known line of Python while the
  others wait. Example: "rank 1 (pid 815) is in load_batch (worker2.py:37)".
- RAS_BEHIND: NCCL RAS says which ranks are behind (who, not where).
  Example: "NCCL RAS: rank 1 (pid 815) is behind in AllReduce".
- NVML: the NVML picture alone (who spins, who does not). The detector's own sentence.
- CONTEXT: what a source could not say (absent, refused, garbage), and other remarks.
  Never the headline.

Within one level, earlier findings keep their order (the sort is stable), so a source may
order its own sentences.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class Strength(IntEnum):
    """How strongly a finding explains a stalled job; higher is stronger."""

    CONTEXT = 0
    NVML = 10
    RAS_BEHIND = 20
    CULPRIT_LINE = 30
    MISMATCH = 40
    RANK_GONE = 50
    HARDWARE = 60


@dataclass(frozen=True)
class Finding:
    """One sentence of evidence with where it came from and how strong it is.

    `headline` is the sentence used when this finding leads the verdict (defaults to `text`);
    `frame` is the line of Python that explains it (`func (file:line)`), when one does.
    """

    text: str
    strength: Strength = Strength.CONTEXT
    source: str = ""  # "nvml", "health", "lastwords", "rendezvous", "stacks", "ras", ...
    ranks: tuple[int, ...] = ()
    gpus: tuple[int, ...] = ()
    pids: tuple[int, ...] = ()
    frame: str | None = None
    headline: str | None = None

    @property
    def lead(self) -> str:
        return self.headline or self.text

    def to_json(self) -> dict[str, object]:
        return {
            "text": self.text,
            "strength": self.strength.name.lower(),
            "source": self.source,
            "ranks": list(self.ranks),
            "gpus": list(self.gpus),
            "pids": list(self.pids),
            "frame": self.frame,
        }


def rank(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Strongest first; equal strengths keep the order they were given in; a sentence said
    twice (two sources, same words) is kept once, at its strongest."""
    seen: dict[str, Finding] = {}
    for f in findings:
        old = seen.get(f.text)
        if old is None or f.strength > old.strength:
            seen[f.text] = f
    order = {id(f): i for i, f in enumerate(seen.values())}
    return tuple(sorted(seen.values(), key=lambda f: (-int(f.strength), order[id(f)])))


def strongest(findings: Iterable[Finding]) -> Finding | None:
    """The finding that leads, or None when nothing beats the NVML picture."""
    top = next(iter(rank(findings)), None)
    return top if top is not None and top.strength > Strength.NVML else None
