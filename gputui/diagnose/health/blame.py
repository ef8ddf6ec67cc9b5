"""Which GPU the verdict blames, so the next step can be offered: probe that GPU and its links.

Once a verdict blames hardware, the next step in every case is the same: test that GPU and
its links alone (the pair probe of the blamed GPU against each peer, gputui.probe). This
picks the GPU, from what is already known, strongest first:

1. a HARDWARE finding of the verdict about one GPU (a hardware Xid, a lost or failed GPU);
2. a link of one GPU whose NVLink or PCIe error rate stands out (gputui.diagnose.health.link_rates;
   the link's number is kept, so the probe's result can name it);
3. a straggler alone on its GPU whose clocks stand out (a thermal or power slowdown);
4. with no job at all, a GPU the node's health calls failed or degraded, or a link of the
   node whose rate stands out.

A program's fault (Xid 31 on a healthy GPU) blames the program, not the GPU: it is not a
HARDWARE finding and blames nothing. Pure: the same verdict blames the same GPU in a replay.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gputui.diagnose.ranking import Strength

_LINK = re.compile(r"\blink (\d{1,2}):")
# slow_why's words when the straggler's own clocks are why (not its peers' comparison)
_CLOCKS = ("clocks are held back", "slowdown", "power brake")


@dataclass(frozen=True)
class Blame:
    """The GPU to probe, why, and the link the evidence names (None: none named)."""

    gpu: int
    why: str
    link: int | None = None
    source: str = "verdict"  # "verdict" | "link" | "straggler" | "health" | "option"

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "link": self.link, "why": self.why, "source": self.source}


def blamed(
    v: Any,
    sick: Mapping[int, str] | None = None,
    links: Iterable[Any] = (),
) -> Blame | None:
    """The GPU the verdict `v` blames; else (no alarm) a GPU of `sick` ({gpu: why}) or of
    `links` (link_rates.LinkFinding); None when nothing blames hardware.

    Args:
        v: the verdict shown (a hang's suspect or a slow job's straggler blames its GPU).
        sick: {gpu: why} of the GPUs whose health is not ok; None: none.
        links: link_rates.LinkFinding of links whose error rates stand out.

    Returns:
        The Blame (GPU, why, link, source), or None when nothing blames hardware.
    """
    for f in getattr(v, "ranked", ()) or ():
        if f.strength == Strength.HARDWARE and len(f.gpus) == 1:
            m = _LINK.search(f.text)
            return Blame(f.gpus[0], f.text, int(m.group(1)) if m else None)
    for f in getattr(v, "ranked", ()) or ():
        if f.source == "health" and len(f.gpus) == 1 and (m := _LINK.search(f.text)):
            return Blame(f.gpus[0], f.text, int(m.group(1)), "link")
    straggler = _straggler(v)
    if straggler is not None:
        return straggler
    if v is not None and getattr(v, "alarm", False):
        return None  # a hang that blames no hardware: the probe is not the next step
    for gpu, why in sorted((sick or {}).items()):
        return Blame(gpu, why, None, "health")
    for lf in links:
        if getattr(lf, "link", None) is not None:
            return Blame(lf.gpu, lf.text, lf.link, "link")
    return None


def _straggler(v: Any) -> Blame | None:
    """A straggler alone on its GPU whose clocks are why (gputui.diagnose.slow.why)."""
    stragglers = tuple(getattr(v, "stragglers", ()) or ())
    why = getattr(v, "slow_why", None) or {}
    if len(stragglers) != 1 or not isinstance(why, dict):
        return None
    text = " ".join(str(x) for x in (why.get("words") or why.get("why") or []))
    reason = str(getattr(v, "reason", "") or "")
    said = f"{text} {reason}".lower()
    if not any(w in said for w in _CLOCKS):
        return None
    return Blame(stragglers[0], reason or text, None, "straggler")


def forced(gpu: int) -> Blame:
    """`--blame-gpu G`: the person names the GPU (a drill, or a judgement of their own).

    Args:
        gpu: the GPU index `--blame-gpu` names.

    Returns:
        A Blame of source `option`.
    """
    return Blame(gpu, f"GPU {gpu} named by --blame-gpu", None, "option")
