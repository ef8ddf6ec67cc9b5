"""The pair probe of the blamed GPU, as a finding that joins the verdict.

Pure: reads the `{"type": "blamed_probe"}` record (gputui.probe.blamed makes it from a probe
run, or from a refusal), so a recording that carries it says the same words. The record is
checked like any other: anything malformed is one CONTEXT finding.

What the probe says, against the blamed GPU's other pairs (the healthy links of one kind on
one node are alike, so one far below its siblings is the one to look at):

- a pair of the blamed GPU that failed, or carried data at under half the median of its
  other pairs, is HARDWARE: "GPU 3 ↔ GPU 5: 12 GB/s against 390 GB/s for the other pairs:
  link 7" (the link the error rates named, where they named one);
- on gloo (CPU processes standing in for GPUs, a drill) only failures are judged;
- every pair passed and alike: CONTEXT ("the pair probe of GPU 3: its 3 pairs passed at
  380-395 GB/s, no pair stands out");
- the probe was refused (ranks still hold the GPUs), cancelled or failed: CONTEXT, saying
  what to do.
"""

from __future__ import annotations

import statistics
from typing import Any

from gputui.diagnose.evidence import Evidence
from gputui.diagnose.ranking import Finding, Strength

KIND = "blamed_probe"
SLOW_SHARE = 0.5  # a pair under half the median of the GPU's other pairs stands out
OUTCOMES = ("done", "refused", "failed", "cancelled")
MAX_PAIRS = 256


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1e7:
        return None
    return float(v)


def _pairs(record: dict[str, Any]) -> list[dict[str, Any]]:
    pairs = record.get("pairs")
    if not isinstance(pairs, list) or len(pairs) > MAX_PAIRS:
        raise ValueError(f"'pairs' must be a list of at most {MAX_PAIRS}")
    out = []
    for p in pairs:
        pair = p.get("pair") if isinstance(p, dict) else None
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in pair)
        ):
            raise ValueError("a pair is [a, b]")
        reason = p.get("reason")
        out.append(
            {
                "pair": (pair[0], pair[1]),
                "ok": p.get("ok") is True,
                "gbps": _num(p.get("gbps")),
                "reason": str(reason)[:300] if reason else None,
            }
        )
    return out


def _gbps(v: float) -> str:
    return f"{v:.0f}" if v >= 10 else f"{v:.1f}"


def probe_findings(record: dict[str, Any]) -> list[Finding]:
    """The probe's sentences, strongest first.

    Args:
        record: a `blamed_probe` record.

    Returns:
        Its Findings, strongest first: why the probe did not run, or what its pairs say.
    """
    gpu = record.get("gpu")
    if isinstance(gpu, bool) or not isinstance(gpu, int) or record.get("outcome") not in OUTCOMES:
        raise ValueError("not a blamed_probe record")
    link = record.get("link")
    on_link = f": link {link}" if isinstance(link, int) and not isinstance(link, bool) else ""
    outcome = record["outcome"]
    if outcome != "done":
        err = str(record.get("error") or outcome)[:300]
        return [Finding(f"the pair probe of GPU {gpu}: {outcome}: {err}", Strength.CONTEXT, KIND)]
    pairs = _pairs(record)
    if not pairs:
        return [Finding(f"the pair probe of GPU {gpu}: no pair ran", Strength.CONTEXT, KIND)]
    out: list[Finding] = []
    scored = [p for p in pairs if p["ok"] and p["gbps"] is not None]
    # gloo: CPU processes standing in for GPUs (a drill): their copy speed is the host's
    # memory and scheduler, not a link's, so only failures are judged.
    simulated = record.get("backend") == "gloo"
    if len(pairs) > 1 and not any(p["ok"] for p in pairs):
        first = pairs[0]["reason"] or "no result"
        text = f"GPU {gpu}: all its {len(pairs)} pairs failed ({first}){on_link}"
        return [Finding(text, Strength.HARDWARE, KIND, gpus=(gpu,))]
    for p in pairs:
        other = p["pair"][1] if p["pair"][0] == gpu else p["pair"][0]
        if not p["ok"]:
            out.append(
                Finding(
                    f"GPU {gpu} ↔ GPU {other}: failed: {p['reason'] or 'no result'}{on_link}",
                    Strength.HARDWARE,
                    KIND,
                    gpus=(gpu,),
                )
            )
            continue
        rest = [q["gbps"] for q in scored if q is not p]
        if p["gbps"] is None or not rest or simulated:
            continue
        median = statistics.median(rest)
        if median > 0 and p["gbps"] < SLOW_SHARE * median:
            out.append(
                Finding(
                    f"GPU {gpu} ↔ GPU {other}: {_gbps(p['gbps'])} GB/s against "
                    f"{_gbps(median)} GB/s for the other pairs{on_link}",
                    Strength.HARDWARE,
                    KIND,
                    gpus=(gpu,),
                )
            )
    if out:
        return out
    vals = [p["gbps"] for p in scored]
    spread = (
        f" at {_gbps(min(vals))}-{_gbps(max(vals))} GB/s"
        if len(vals) > 1
        else f" at {_gbps(vals[0])} GB/s"
        if vals
        else ""
    )
    n = len(pairs)
    judged = "speeds not judged on CPU stand-ins (gloo)" if simulated else "no pair stands out"
    return [
        Finding(
            f"the pair probe of GPU {gpu}: its {n} pair{'s' if n != 1 else ''} passed{spread}, "
            f"{judged}",
            Strength.CONTEXT,
            KIND,
            gpus=(gpu,),
        )
    ]


def explain_blamed_probe(record: dict[str, Any], verdict: Any, snap: Any) -> Evidence:
    """The probe's findings as evidence for the verdict it was run from.

    Args:
        record: a `blamed_probe` record (possibly from an untrusted recording).
        verdict: the verdict the probe was run from.
        snap: the sample it was run at (unused: a probe's record stands alone).

    Returns:
        Evidence of kind `blamed_probe`, its findings strongest first.
    """
    try:
        found = probe_findings(record)
    except ValueError as e:
        text = f"the blamed GPU's probe record could not be read: {e}"
        return Evidence(KIND, findings=(text,), ranked=(Finding(text, Strength.CONTEXT, KIND),))
    extra = {
        k: record.get(k)
        for k in (
            "gpu",
            "link",
            "why",
            "source",
            "outcome",
            "error",
            "held_by",
            "backend",
            "t",
            "wall_s",
        )
    }
    extra["pairs"] = record.get("pairs") if isinstance(record.get("pairs"), list) else []
    return Evidence(KIND, findings=tuple(f.text for f in found), ranked=tuple(found), extra=extra)


def with_probe_findings(v: Any, ev: Evidence) -> Any:
    """The verdict with the probe's findings ranked among its own: a probe that confirms the
    hardware (HARDWARE) may lead; one that clears it is context under the rest.

    Args:
        v: the verdict the probe was run from.
        ev: the probe's Evidence (explain_blamed_probe).

    Returns:
        A new verdict with the probe's findings among its own.
    """
    from dataclasses import replace

    from gputui.diagnose.ranking import rank, strongest

    ranked = rank([*(getattr(v, "ranked", ()) or ()), *ev.ranked])
    top = strongest(ranked)
    return replace(
        v,
        ranked=ranked,
        findings=tuple(f.text for f in ranked if f.source != "nvml"),
        reason=top.lead if top is not None else v.reason,
        evidence={**v.evidence, KIND: ev.extra},
    )
