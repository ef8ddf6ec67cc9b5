"""What PyTorch's flight recorder says about a stalled job, as ranked findings.

Pure: reads the "flightrec" part of an `nccl` record (the analyzer's result, see
gputui/collect/nccl/fr_analyzer.py), so a replay says what the live run said. A collective that
does not match across ranks (COLLECTIVE_TYPE_MISMATCH, sizes) is a MISMATCH with the line of
code that called it; ranks that never joined a collective are the ranks behind (who, not
where); an analyzer that could not judge, or failed, is context.
"""

from __future__ import annotations

import re
from typing import Any

from gputui.diagnose.rank_lists import ranks_text
from gputui.diagnose.ranking import Finding, Strength

FR = "flightrec"  # the source of these findings (gputui.diagnose.ranking)


def _collective(name: Any) -> str:
    text = str(name or "?")
    return text.split(":", 1)[1] if ":" in text else text


def _set_text(v: Any) -> str:
    if isinstance(v, list) and all(isinstance(x, int) for x in v):
        return ranks_text(v)
    return str(v)[:80]


def explain_flightrec(fr: Any) -> tuple[list[Finding], dict[str, Any]]:
    """Ranked findings from the record's "flightrec" part (the analyzer's result): a
    collective that does not match across ranks (COLLECTIVE_TYPE_MISMATCH, sizes) is a
    MISMATCH with the line that called it; ranks missing from a collective are the ranks
    behind (who, not where); the rest is context."""
    if not isinstance(fr, dict) or fr.get("outcome") in (None, "off"):
        return [], {}
    outcome = fr.get("outcome")
    if outcome != "done":
        err = str(fr.get("error") or outcome)[:300]
        return [Finding(f"flight recorder: {err}", Strength.CONTEXT, FR)], {"flightrec": outcome}
    found: list[Finding] = []
    items = [x for x in fr.get("findings") or [] if isinstance(x, dict)]
    for x in items[:10]:
        seq, coll = x.get("seq"), _collective(x.get("collective"))
        group = f", group {x['group']}" if x.get("group") else ""
        frame = x.get("frame") if isinstance(x.get("frame"), str) else None
        at = f" at {frame}" if frame else ""
        if x.get("kind") == "missing":
            missing = _ints(x.get("missing_ranks"))
            found.append(
                Finding(
                    f"flight recorder: not all ranks joined collective {seq} ({coll}{group}): "
                    f"missing {_set_text(x.get('missing_ranks'))}.",
                    Strength.RAS_BEHIND,
                    FR,
                    ranks=missing,
                )
            )
        elif x.get("kind") == "errors":
            err = str(x.get("error") or "?")[:200]
            found.append(
                Finding(
                    f"flight recorder: collective {seq} ({coll}{group}) does not match across "
                    f"ranks: {err}.",
                    Strength.MISMATCH,
                    FR,
                    ranks=tuple(int(r) for r in _CULPRIT.findall(err)[:16]),
                    frame=frame,
                    headline=_mismatch_headline(err, seq, coll, at),
                )
            )
        elif x.get("kind") == "size":
            found.append(
                Finding(
                    f"flight recorder: collective {seq} ({coll}) sizes differ across ranks.",
                    Strength.MISMATCH,
                    FR,
                    frame=frame,
                    headline=f"ranks disagree on the sizes of collective {seq} ({coll}{at})",
                )
            )
        elif x.get("kind") == "undecided":
            found.append(
                Finding(
                    f"flight recorder: cannot judge collective {seq}: no dumps from "
                    f"{_set_text(x.get('missing_dumps'))} (they are on other nodes).",
                    Strength.CONTEXT,
                    FR,
                )
            )
    if not items:
        found.append(
            Finding(
                f"flight recorder: the analyzer found no mismatch in the last collectives of "
                f"{_set_text(fr.get('dumps') or [])}.",
                Strength.CONTEXT,
                FR,
            )
        )
    return found, {"flightrec": {"findings": items[:10], "dumps": fr.get("dumps") or []}}


_CULPRIT = re.compile(r"Culprit rank (\d+)")
_TYPES = re.compile(
    r"Culprit rank (\d+); Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: "
    r"'([^']+)' does not match found collective type: '([^']+)'"
)


def _mismatch_headline(err: str, seq: Any, coll: str, at: str) -> str:
    """The analyzer's COLLECTIVE_TYPE_MISMATCH said plainly: who called what instead."""
    m = _TYPES.search(err)
    if m is None:
        return f"ranks disagree at collective {seq} ({coll}{at}): {err}"
    rank, expected, got = m.groups()
    return (
        f"ranks in different collectives: rank {rank} in {got}, the others in {expected}"
        f"{at} (flight recorder, collective {seq})"
    )


def _ints(v: Any) -> tuple[int, ...]:
    return tuple(x for x in v[:64] if isinstance(x, int)) if isinstance(v, list) else ()
