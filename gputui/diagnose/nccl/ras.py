"""What NCCL RAS and PyTorch's flight recorder say about a stalled job, in sentences.

Pure: everything here reads the `{"type": "nccl", ...}` record that the NCCL gatherer
(gputui/tools/gather/nccl.py) took, so a replay of a recording says exactly what the live
run said. The record is untrusted input (it may come from a file): anything malformed becomes
a finding that says so, never an exception.

Here the record as a whole: why RAS could not answer, the two answers taken a few seconds apart
compared communicator by communicator (the sentences about one communicator, and when "behind"
is claimed, are in ras_comm.py), the processes RAS says are dead, the order and the cap of
the sentences, their strength, and the explainer that joins RAS to the flight recorder.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from gputui.collect.model import Snapshot
from gputui.collect.nccl.ras_model import RasAnswer, answer_from_dict
from gputui.diagnose.evidence import Evidence
from gputui.diagnose.nccl.flightrec import explain_flightrec
from gputui.diagnose.nccl.pids import PidMap, pid_map, with_host_pids
from gputui.diagnose.nccl.ras_comm import advanced, comm_findings, on_this_node, secs
from gputui.diagnose.nccl.ras_mismatch import behind_yet_spinning
from gputui.diagnose.ranking import Finding, Strength
from gputui.diagnose.verdict import Verdict

KIND = "nccl"
RAS = "ras"  # the source of RAS's findings (gputui.diagnose.ranking); FR the recorder's
RAS_MIN_VERSION = (2, 24)
MAX_FINDINGS = 12  # sentences from RAS in one verdict


# ---------------------------------------------------------------- RAS


def _version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = []
    for p in text.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


# A job that never loaded NCCL (gloo, CPU work, a serving process) has no NCCL hang for RAS to
# explain: said in check --json's "nccl" entry, but not as a finding in the banner.
NO_NCCL = "The job has not loaded NCCL (no libnccl in its memory map), so there is no RAS."


def ras_unavailable(ras: dict[str, Any]) -> str | None:
    """Why RAS cannot answer, from the job's environment and the NCCL it loaded."""
    env = ras.get("env") or {}
    nccl = ras.get("nccl") or {}
    if str(env.get("NCCL_RAS_ENABLE", "")).strip() == "0":
        return "NCCL RAS is off (NCCL_RAS_ENABLE=0 in the job's environment)."
    ver = _version(nccl.get("version"))
    if ver is not None and ver[:2] < RAS_MIN_VERSION:
        return f"NCCL {nccl.get('version')} is too old for RAS (needs 2.24)."
    if nccl.get("loaded") is False:
        return NO_NCCL
    return None


def judge_ras(
    first: RasAnswer | None, second: RasAnswer, dt: float | None, local_pids: set[int]
) -> tuple[list[str], dict[str, Any]]:
    """Findings from two answers a few seconds apart (or one), and their JSON summary."""
    out: dict[str, Any] = {"behind": [], "missing": [], "mismatch": False}
    found: list[str] = []
    # A process that a communicator's missing rank already names is said once, as that
    # rank; one of this node's is said to be here (its address is not "another host").
    named = {m.pid for c in second.comms for m in c.missing}
    for p in second.dead_processes:
        if p.pid not in named:
            here = on_this_node(p.pid, local_pids)
            found.append(f"NCCL RAS: process {p.pid} on {p.host} (GPU {p.gpus}{here}) is dead.")
    for p in second.missing_processes:
        if p.pid not in named:
            here = on_this_node(p.pid, local_pids)
            found.append(
                f"NCCL RAS: no answer from process {p.pid} on {p.host} (GPU {p.gpus}{here})."
            )
    for c in second.comms:
        old = first.comm(c.hash) if first is not None else None
        found += comm_findings(c, old, dt, local_pids, out)
        moved = advanced(old, c) if old is not None else None
        if moved is not None:
            out["progress"] = True
            if not any("still move" in f for f in found):
                op, before, now = moved
                found.append(
                    f"NCCL RAS: collective counts advance ({op} {before} -> {now} over "
                    f"{secs(dt)} s): the job is busy communicating, not stalled."
                )
    if second.timeouts:
        found.append(
            f"NCCL RAS met {second.timeouts} communication timeout(s) while gathering: "
            "some processes are slow to answer or unreachable."
        )
    if local_pids and second.format == "json" and second.comms and not (second.pids() & local_pids):
        found.append(
            "NCCL RAS answered for processes that are not this job's ranks: another job on "
            "this node holds the RAS port (set NCCL_RAS_ADDR per job)."
        )
    order = ("dead", "does not answer", "no answer", "aborted", "error", "different", "behind")

    def rank_of(s: str) -> int:
        return next((i for i, w in enumerate(order) if w in s), len(order))

    found = sorted(found, key=rank_of)
    if len(found) > MAX_FINDINGS:
        found = found[: MAX_FINDINGS - 1] + [
            f"NCCL RAS: and {len(found) - MAX_FINDINGS + 1} more finding(s) of the kinds above."
        ]
    return found, out


def _answers(ras: dict[str, Any]) -> tuple[list[RasAnswer], list[float], list[str]]:
    answers, times, problems = [], [], []
    for q in ras.get("queries") or []:
        if not isinstance(q, dict):
            problems.append("a RAS query in the record is not an object")
            continue
        if q.get("outcome") == "done" and q.get("answer") is not None:
            try:
                answers.append(answer_from_dict(q["answer"]))
                t = q.get("t")
                times.append(float(t) if isinstance(t, (int, float)) else 0.0)
            except ValueError as e:
                problems.append(f"a RAS answer in the record is malformed ({e})")
        elif q.get("error"):
            problems.append(str(q.get("error"))[:200])
    return answers, times, problems


def explain_ras(
    ras: Any, local_pids: set[int], pids: PidMap | None = None
) -> tuple[list[str], dict[str, Any]]:
    """Findings from the record's "ras" part, RAS's pids mapped to this host's (`pids`)."""
    if not isinstance(ras, dict):
        return [], {}
    answers, times, problems = _answers(ras)
    answers = [with_host_pids(a, pids or {}) for a in answers]
    if not answers:
        why = ras_unavailable(ras)
        if why == NO_NCCL:
            return [], {"ras": "unavailable", "why": why}
        if why is None:
            last = problems[-1] if problems else "no answer"
            why = f"NCCL RAS did not answer: {last}."
        return [why], {"ras": "unavailable"}
    second = answers[-1]
    first = answers[-2] if len(answers) > 1 else None
    dt = times[-1] - times[-2] if first is not None else None
    found, summary = judge_ras(first, second, dt, local_pids)
    summary["nccl_version"] = second.nccl_version
    summary["format"] = second.format
    # What the client noted about the answer (a listener not tied to a rank, a world size
    # that disagrees with the job's, JSON read as text): context, said once each.
    notes = list(dict.fromkeys(n for a in answers for n in a.notes if n))[:8]
    found += [f"NCCL RAS (note): {n}" for n in notes]
    if notes:
        summary["notes"] = notes
    return found, summary


_RANK = re.compile(r"^NCCL RAS: (?:rank|process) (\d+)")


def ras_finding(text: str, summary: dict[str, Any]) -> Finding:
    """One RAS sentence with its strength: ranks in different collectives are a MISMATCH,
    ranks behind, dead or not answering are RAS_BEHIND (who, not where), progress, absence
    and the rest are CONTEXT."""
    if "ranks entered different collectives" in text:
        odd = tuple(summary.get("mismatch_ranks") or ())
        return Finding(
            text,
            Strength.MISMATCH,
            RAS,
            ranks=odd,
            headline="ranks in different collectives (NCCL RAS): "
            + text.split("different collectives: ", 1)[-1].split(" (a collective-type")[0],
        )
    m = _RANK.match(text)
    weak = ("behind", "dead", "does not answer", "no answer", "aborted", "reported")
    if text.startswith("NCCL RAS: ") and any(w in text for w in weak) and "still move" not in text:
        ranks = (int(m.group(1)),) if m and text.startswith("NCCL RAS: rank") else ()
        return Finding(text, Strength.RAS_BEHIND, RAS, ranks=ranks)
    return Finding(text, Strength.CONTEXT, RAS)


# ---------------------------------------------------------------- the explainer


def explain_nccl(record: dict[str, Any], verdict: Verdict, snap: Snapshot | None) -> Evidence:
    """The findings of one `nccl` record, for the verdict of the stalled job.

    Args:
        record: an `nccl` record: RAS and the flight recorder (possibly from an untrusted
            recording).
        verdict: the verdict of the job it was gathered for.
        snap: the sample it was gathered at; None when not known.

    Returns:
        Evidence of kind `nccl`: ranked findings (ranks behind, mismatches), and RAS's answer in
        `extra`.
    """
    kind = record.get("type") if isinstance(record, dict) else None
    if kind not in (KIND, RAS):
        return Evidence(KIND, findings=("NCCL evidence: the record is not an nccl record.",))
    local = {p.pid for p in snap.processes} if snap is not None else set()
    local |= set(verdict.suspect_pids)
    ranks = record.get("local")
    for r in ranks if isinstance(ranks, list) else []:
        if isinstance(r, dict) and isinstance(r.get("pid"), int):
            local.add(r["pid"])
    ras_found, ras_json = explain_ras(record.get("ras"), local, pid_map(record.get("local")))
    fr_found, fr_json = explain_flightrec(record.get("flightrec"))
    if record.get("error"):
        ras_found.append(f"NCCL evidence could not be gathered: {str(record['error'])[:200]}")
    ras_found = behind_yet_spinning(ras_found, ras_json, verdict, local, record.get("local"))
    extra = {**ras_json, **fr_json}
    named = _named_local_pids(record, extra, local)
    ranked = [ras_finding(t, ras_json) for t in ras_found] + fr_found
    ranked = [_with_pids(f, record) for f in ranked]
    return Evidence(
        str(kind),
        findings=tuple(f.text for f in ranked),
        ranked=tuple(ranked),
        extra=extra,
        suspect_pids=named,
    )


def _with_pids(f: Finding, record: dict[str, Any]) -> Finding:
    """The local pids of the ranks a finding names (RAS and the analyzer speak in ranks)."""
    loc = record.get("local")
    by_rank = {
        r["rank"]: r["pid"]
        for r in (loc if isinstance(loc, list) else [])
        if isinstance(r, dict) and isinstance(r.get("rank"), int) and isinstance(r.get("pid"), int)
    }
    pids = tuple(by_rank[r] for r in f.ranks if r in by_rank)
    return replace(f, pids=pids) if pids and not f.pids else f


def _named_local_pids(
    record: dict[str, Any], extra: dict[str, Any], local: set[int]
) -> tuple[int, ...]:
    """Local pids that RAS (behind for sure, or missing) or the flight recorder (a rank that
    did not join) names as the rank the others wait for: the verdict's suspects beyond NVML."""

    def items(d: Any, key: str) -> list[Any]:
        v = d.get(key) if isinstance(d, dict) else None
        return v if isinstance(v, list) else []

    out: list[int] = []
    for e in items(extra, "behind") + items(extra, "missing"):
        pid = e.get("pid") if isinstance(e, dict) else None
        if isinstance(pid, int) and pid in local and e.get("confirmed", True) and pid not in out:
            out.append(pid)
    by_rank = {
        r["rank"]: r["pid"]
        for r in items(record, "local")
        if isinstance(r, dict) and isinstance(r.get("rank"), int) and isinstance(r.get("pid"), int)
    }
    for f in items(extra.get("flightrec"), "findings"):
        for rank in items(f, "missing_ranks"):
            pid = by_rank.get(rank) if isinstance(rank, int) else None
            if pid is not None and pid not in out:
                out.append(pid)
    return tuple(out)
