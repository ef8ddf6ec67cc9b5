"""Reading a probe: grade each cell against the best pair, name the worst GPU or link.

Why relative to the best pair: absolute figures differ by an order of magnitude between
NVLink and PCIe machines, but on one node the healthy links of one kind should be alike, so
a link far below its best sibling is the one to look at. A GPU whose every pair fails is
named as the broken GPU (its links all share it); otherwise the worst link is named.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputui.jsonout import dumps
from gputui.probe.result import AllReduceResult, CopyResult, Pair, ProbeReport

GOOD = 0.8  # >= 80% of the best pair
FAIR = 0.5  # 50-80%; below, or failed: bad


def grade(value: float | None, best: float | None, ok: bool = True) -> str:
    """ "good", "fair" or "bad" for a cell, compared with the best cell of the run.

    Args:
        value: the cell's GB/s; None: it did not run.
        best: the best cell's GB/s (best_copy).
        ok: whether the cell passed.

    Returns:
        `good`, `fair` or `bad`.
    """
    if not ok or value is None:
        return "bad"
    if not best or best <= 0:
        return "good"
    ratio = value / best
    return "good" if ratio >= GOOD else "fair" if ratio >= FAIR else "bad"


def best_copy(report: ProbeReport) -> float | None:
    """The fastest copy of the run, that every other cell is graded against.

    Args:
        report: the probe's report.

    Returns:
        GB/s of the fastest copy that passed, or None when none did.
    """
    vals = [c.gbps for p in report.pairs for c in p.copies if c.ok and c.gbps]
    return max(vals) if vals else None


@dataclass
class Worst:
    kind: str  # "gpu", "link", "none" (all passed), "all" (every pair failed), "empty"
    text: str
    gpu: int | None = None
    pair: Pair | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "gpu": self.gpu,
            "pair": list(self.pair) if self.pair else None,
            "text": self.text,
        }


def _link_score(report: ProbeReport, a: int, b: int) -> float | None:
    p = report.pair(a, b)
    if p is None or not p.ok:
        return None
    vals = [c.gbps for c in p.copies if c.gbps is not None]
    return min(vals) if vals else None


def worst(report: ProbeReport) -> Worst:
    """What the run says in one sentence: the GPU or link at fault, every pair failed, or all
    passed.

    Args:
        report: the probe's report.

    Returns:
        The Worst: its kind (gpu, link, all, none, empty), the sentence, the GPU or pair.
    """
    pairs = report.pairs
    if not pairs:
        return Worst("empty", "no pairs were probed")
    failed = [p for p in pairs if not p.ok]
    if failed and len(failed) == len(pairs):
        if len(report.devices) == 2:
            a, b = pairs[0].pair
            return Worst(
                "link",
                f"link {a}-{b} failed (GPU {a}, GPU {b} or the link between "
                f"them): {pairs[0].reason}",
                pair=(a, b),
            )
        return Worst(
            "all",
            "every pair failed: look at the driver, the backend or the "
            f"environment rather than one GPU (first: {failed[0].reason})",
        )
    if failed:
        for g in report.devices:
            mine = [p for p in pairs if g in p.pair]
            if len(report.devices) > 2 and mine and all(not p.ok for p in mine):
                return Worst(
                    "gpu",
                    f"GPU {g} is the broken GPU: all its {len(mine)} pairs "
                    f"failed ({mine[0].reason})",
                    gpu=g,
                )
        p = failed[0]
        more = f" (and {len(failed) - 1} more failed)" if len(failed) > 1 else ""
        return Worst("link", f"worst link {p.pair[0]}-{p.pair[1]}: {p.reason}{more}", pair=p.pair)
    scored = [(s, p.pair) for p in pairs if (s := _link_score(report, *p.pair)) is not None]
    if not scored:
        return Worst("none", "all pairs passed")
    low, pair = min(scored)
    best = best_copy(report) or low
    pct = 100 * low / best if best else 100.0
    return Worst(
        "link",
        f"all pairs passed; slowest link {pair[0]}-{pair[1]}: {low:.1f} GB/s "
        f"copy, {pct:.0f}% of the best",
        pair=pair,
    )


def cell_text(report: ProbeReport, src: int, dst: int) -> str:
    """A matrix cell: copy GB/s src->dst, or FAIL/-, with the topology label when known."""
    p = report.pair(src, dst)
    c = p.copy(src, dst) if p else None
    if p is None:
        text = "-"
    elif c is not None and c.ok and c.gbps is not None:
        text = f"{c.gbps:.1f}"
    else:
        text = "FAIL"
    link = report.link(src, dst)
    return f"{text} {link.label}" if link and link.label != "N/A" else text


def matrix_rows(report: ProbeReport) -> list[list[str]]:
    """Header row, then one row per source GPU; diagonal cells are blank."""
    devs = report.devices
    pre = "GPU" if report.backend == "nccl" else "dev"
    rows = [["src\\dst", *(f"{pre}{d}" for d in devs)]]
    for a in devs:
        rows.append([f"{pre}{a}", *("." if a == b else cell_text(report, a, b) for b in devs)])
    return rows


def report_text(report: ProbeReport) -> str:
    """The plain-text report: the copy matrix, all_reduce per pair, failures, the worst.

    Args:
        report: the probe's report.

    Returns:
        The text, lines joined.
    """
    rows = matrix_rows(report)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    unit = "GB/s" if report.backend == "nccl" else "GB/s, CPU simulated devices over gloo"
    out = [f"Peer copy bandwidth ({unit}), row = source, column = destination:"]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    out.append("")
    out.append("all_reduce (2 ranks):")
    for p in report.pairs:
        ar = p.allreduce
        if p.ok and ar is not None and ar.busbw_gbps is not None:
            lat = f"{ar.latency_us:.0f} us" if ar.latency_us is not None else "N/A"
            out.append(
                f"  {p.pair[0]}-{p.pair[1]}: {ar.busbw_gbps:.1f} GB/s bus bandwidth, "
                f"small-message latency {lat}"
            )
        else:
            out.append(f"  {p.pair[0]}-{p.pair[1]}: FAIL")
    if report.failures:
        out.append("")
        out.append("Failures:")
        out += [f"  {p.pair[0]}-{p.pair[1]}: {p.reason}" for p in report.failures]
    out.append("")
    out.append(worst(report).text)
    status = "cancelled" if report.cancelled else "ok" if report.ok else "FAILED"
    out.append(f"{len(report.pairs)} pairs, {status}, {report.wall_s:.1f} s")
    return "\n".join(out)


def report_json(report: ProbeReport) -> dict[str, Any]:
    """The report as `probe --json` prints it and the probe screen saves it, with its worst pair.

    Args:
        report: the probe's report.

    Returns:
        The JSON object.
    """
    copies: list[dict[str, Any]] = []
    for a in report.devices:
        for b in report.devices:
            if a == b:
                continue
            p = report.pair(a, b)
            c = p.copy(a, b) if p else None
            copies.append((c or CopyResult(a, b)).to_json())
    allreduce = []
    for p in report.pairs:
        ar = p.allreduce or AllReduceResult(p.pair)
        allreduce.append(ar.to_json())
    return {
        "devices": list(report.devices),
        "backend": report.backend,
        "size_bytes": report.size,
        "timeout_s": report.timeout_s,
        "copy": copies,
        "allreduce": allreduce,
        "topology": [t.to_json() for t in report.topology.values()],
        "pairs": [
            {
                "pair": list(p.pair),
                "round": p.round,
                "ok": p.ok,
                "reason": p.reason,
                "elapsed_s": p.elapsed_s,
            }
            for p in report.pairs
        ],
        "ok": report.ok,
        "failures": [{"pair": list(p.pair), "reason": p.reason} for p in report.failures],
        "worst": worst(report).to_json(),
        "cancelled": report.cancelled,
        "wall_s": round(report.wall_s, 3),
        "started_at": report.started_at,
        "host": report.host,
    }


def save_report(report: ProbeReport, path: Path) -> Path:
    """Write the JSON (creating the folder); returns the path written.

    Args:
        report: the probe's report.
        path: the file to write.

    Returns:
        `path`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(report_json(report), indent=2) + "\n", encoding="utf-8")
    return path
