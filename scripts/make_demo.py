"""Build gputui/data/demo-h200x2-hang.jsonl.gz from the real calibration recording.

GPU readings are copied unchanged from the calibration run's h200x2-trace.jsonl.gz (the same
file as tests/data/h200x2-trace.jsonl.gz). The
calibration format has no process details, so the builder adds what the recording's own
worker script and report establish: each pid's command line and rank (report.json lists
the pids of each phase in rank order; rank r ran on GPU r), the rank variables the
launcher set, the GPU name, UUID and 700 W power limit from report.json. Process state and
CPU are inferred from the GPU reading (a rank whose GPU is busy is running, one at 0% is
sleeping) and marked as such in gputui/data/README.md.

The calibration run also took real `py-spy dump`s of both ranks of the hung jobs at the
start of each `<mode>_dumping` phase (h200x2-tool-output/dump_<mode>_<rank>.txt). They go
into the demo as `{"type": "stacks"}` records at the first sample of that phase, built by
the same code as a live auto-dump (parse_py_spy, stacks_record), so `gputui --demo` and
`gputui check --demo` show the culprit's frame from real dumps without a live process.

    python scripts/make_demo.py CALIBRATION_DIR gputui/data/demo-h200x2-hang.jsonl.gz

CALIBRATION_DIR holds the run's h200x2-trace.jsonl.gz, h200x2-report.json and
h200x2-tool-output/ (a calibration run's output directory).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

JOB_KEY = "master:127.0.0.1:29512"  # what gputui's grouping calls the job (MASTER_ADDR:PORT)
BASE_MEM_MB = 615  # used memory with no process on the GPU, from the recording's idle phase
MEM_TOTAL_MB = 143771  # H200 141 GiB as NVML reports it


def mode_of(phase: str) -> str:
    for suffix in ("_init", "_dumping"):
        phase = phase.removesuffix(suffix)
    return phase


def stacks_records(
    cal: Path, report: dict[str, Any], rows: list[dict[str, Any]], first_seen: dict[int, float]
) -> dict[float, dict[str, Any]]:
    """sample time -> the stacks record of the real dumps taken at that sample."""
    from gputui.collect.model import ProcessInfo
    from gputui.tools.attach.dumpall import DumpAll, group_dumps, parse_py_spy, stacks_record
    from gputui.tools.attach.rank_dump import RankDump
    from gputui.tools.result import Outcome, ToolResult

    out: dict[float, dict[str, Any]] = {}
    for mode, ph in report["phases"].items():
        at = next((d["t"] for d in rows if d["phase"] == f"{mode}_dumping"), None)
        if at is None:
            continue
        dumps, procs = [], []
        for rank, pid in enumerate(ph["pids"]):
            path = cal / "h200x2-tool-output" / f"dump_{mode}_{rank}.txt"
            lines = tuple(path.read_text().splitlines())
            elapsed = float(ph.get(f"pyspy_{rank}_s", 0.0))
            if any(ln.startswith("Thread ") for ln in lines):
                res = ToolResult("py-spy", pid, Outcome.DONE, "", lines, elapsed)
            else:  # "Failed to get process executable name": the rank had exited
                msg = f"process {pid} exited while py-spy ran"
                res = ToolResult("py-spy", pid, Outcome.GONE, msg, lines, elapsed)
            dumps.append(RankDump(pid, rank, res, parse_py_spy(lines) if res.ok else ()))
            created = round(first_seen.get(pid, at) - 5.0, 3)
            procs.append(ProcessInfo(pid=pid, create_time=created, gpus=(rank,), live=False))
        res_all = DumpAll(group_dumps(dumps), tuple(dumps), float(ph["pyspy_parallel_all_s"]))
        out[at] = stacks_record(res_all, t=at, job=JOB_KEY, trigger="stalled", processes=procs)
    return out


def main(cal_dir: str, out: str) -> None:
    cal = Path(cal_dir)
    report = json.loads((cal / "h200x2-report.json").read_text())
    rank_of: dict[int, tuple[int, str]] = {}
    for mode, ph in report["phases"].items():
        for r, pid in enumerate(ph["pids"]):
            rank_of[pid] = (r, mode)
    first_seen: dict[int, float] = {}
    lines = []
    with gzip.open(cal / "h200x2-trace.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for d in rows:
        gi = d["gpu"]
        info = report["info"][f"gpu{gi}"]
        d["name"], d["uuid"] = info["name"], info["uuid"]
        d["power_limit_w"] = info["power_limit_mw"] / 1000
        d["mem_total_mb"] = MEM_TOTAL_MB
        procs = []
        n = max(1, len(d["pids"]))
        for pid in d["pids"]:
            first_seen.setdefault(pid, d["t"])
            rank, mode = rank_of.get(pid, (gi, mode_of(d["phase"])))
            busy = (d.get("util") or 0) > 0
            procs.append(
                {
                    "pid": pid,
                    "create_time": round(
                        first_seen[pid] - 5.0, 3
                    ),  # workers start ~5 s before NVML sees them
                    "user": "root",
                    "name": "python3",
                    "cmdline": ["/opt/torch/.venv/bin/python3", "./worker2.py", mode, "35"],
                    "state": "running" if busy else "sleeping",
                    "cpu": 100.0 if busy else 0.0,
                    "rss_mb": None,
                    "ppid": None,
                    "parent_cmd": None,
                    "gpu_mem_mb": max(0.0, (d["mem_used_mb"] - BASE_MEM_MB) / n),
                    "env": {
                        "RANK": str(rank),
                        "LOCAL_RANK": str(rank),
                        "WORLD_SIZE": "2",
                        "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": "29512",
                    },
                }
            )
        d["procs"] = procs
    records = stacks_records(cal, report, rows, first_seen)
    for i, d in enumerate(rows):
        lines.append(json.dumps(d, separators=(",", ":")))
        last_of_sample = i + 1 == len(rows) or rows[i + 1]["t"] != d["t"]
        if last_of_sample and d["t"] in records:
            lines.append(json.dumps(records.pop(d["t"]), separators=(",", ":")))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", compresslevel=9) as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} lines to {out}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
