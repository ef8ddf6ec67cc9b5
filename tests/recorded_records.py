"""The typed records of the real recordings in tests/data, and of the record types no real
recording carries yet, made by the writers' own code; the paths of their fields, and the
hostile values a field can be given.

Used by tests/test_hostile_records.py (the property test over every field of every record
type) and bench/hostile_sweep.py (the exhaustive sweep).

Which recording holds which type:

| type | recording |
| --- | --- |
| meta, health, ras | h100-one-gpu/comm.trace.jsonl.gz |
| meta, stacks, nccl | h100-shared-gpu-stuck.trace.jsonl.gz |
| rendezvous, lastwords, error | made here, put into h200x2-die-unseen.trace.jsonl.gz |
| progress, debugserver, blamed_probe | made here too (_newer_records), same recording |
| nogpu | made here (_nogpu_records) by the bundle's writer: `bare`, a machine without GPUs |

h200x2-die-unseen is a real recording of a rank that dies: the records made for it name its
job, its ranks' pids and its gone rank, so the replay explains them. The newer three are made
by their writers' own record functions where those are public (the probe's `report_record`,
the progress `Counters.to_json`); the debug server's ranks are those a real 3-rank gloo job's
server answered (tests/test_debugserver_live.py), mapped onto this job's pids.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
RECORDINGS = {
    "comm": DATA / "h100-one-gpu" / "comm.trace.jsonl.gz",
    "stuck": DATA / "h100-shared-gpu-stuck.trace.jsonl.gz",
    "die": DATA / "h200x2-die-unseen.trace.jsonl.gz",
}

# The lines of GPU samples and records, as JSON texts, each file's own.
Lines = list[str]


def lines_of(path: Path) -> Lines:
    return [ln for ln in gzip.decompress(path.read_bytes()).decode().splitlines() if ln.strip()]


def _die_records(lines: Lines) -> list[dict[str, Any]]:
    """A rendezvous, a lastwords and an error record for the `die` recording, at its stall."""
    from gputui.collect.model import RankInfo
    from gputui.collect.procs.hostranks import HostRank
    from gputui.collect.trace.read import read_trace
    from gputui.tools.gather.rendezvous import judge_job

    snaps = read_trace(RECORDINGS["die"])
    job = next(s.jobs[0] for s in snaps if s.jobs)
    t = snaps[len(snaps) * 3 // 4].t
    gone_pid = max(job.pids)
    info = RankInfo(rank=0, world_size=3, master="127.0.0.1:1")
    entry = judge_job(job.key, [HostRank(min(job.pids), t - 30, info, "python3", "127.0.0.1", 1)],
                      stacks=False)  # fmt: skip
    assert entry is not None
    entry["agent"] = {"pid": min(job.pids), "nnodes": "2"}
    entry["listeners"] = [[min(job.pids), "127.0.0.1:1", "python3"]]
    rendezvous = {"type": "rendezvous", "t": round(snaps[2].t, 3), "jobs": [entry]}
    lastwords = {
        "type": "lastwords",
        "t": round(t, 3),
        "job": job.key,
        "trigger": "stalled",
        "core_pattern": "core",
        "kernel_error": None,
        "ranks": [
            {
                "pid": gone_pid,
                "rank": 1,
                "gone": True,
                "seen": True,
                "gpus": [1],
                "create_time": round(snaps[0].t - 40, 3),
                "stdout": {"kind": "pipe", "path": None, "holder": "python3 (pid 1020)"},
                "stderr": {"kind": "file", "path": "/job/rank1.err", "holder": None},
                "cwd": "/job",
                "core_limit": "0",
                "log": "/job/rank1.err",
                "tail": "Traceback (most recent call last):\n"
                '  File "/job/train.py", line 88, in <module>\n'
                "RuntimeError: CUDA error: an illegal memory access was encountered\n",
                "error": None,
                "kernel": [[round(t - 1, 3), "NVRM: Xid (PCI:0000:00:06): 31, pid=1, name=x"]],
                "core": "/job/core.1",
            }
        ],
    }
    error = {"type": "error", "t": round(t + 0.5, 3), "job": job.key, "error": "ValueError()"}
    return [rendezvous, lastwords, error, *_newer_records(job.key, sorted(job.pids), t)]


def _newer_records(key: str, pids: list[int], t: float) -> list[dict[str, Any]]:
    """A progress, a debugserver and a blamed_probe record for the `die` job at its stall."""
    from gputui.collect.procs.progress import Counters
    from gputui.diagnose.health.blame import Blame
    from gputui.probe.blamed import report_record
    from gputui.probe.result import AllReduceResult, CopyResult, PairResult, ProbeReport

    def reading(pid: int, dt: float, cpu: float) -> list[Any]:
        c = Counters(pid, t - dt, cpu, 4096, 0, 1 << 20, 1 << 12, state="S")
        return c.to_json()

    progress = {
        "type": "progress",
        "t": round(t, 3),
        "job": key,
        "trigger": "stalled",
        "stacks": "py-spy",
        "ranks": [
            {
                "pid": pid,
                "rank": r,
                "gpu": r,
                "first": [reading(pid, 30.0, 100.0)],
                "samples": [reading(pid, 2.0, 130.0), reading(pid, 1.0, 130.0)],
                "dumps": [
                    {"t": round(t - 1, 3), "outcome": "done", "moved": False,
                     "frame": "all_reduce (train.py:88)", "functions": ["all_reduce", "step"]},
                ],
            }
            for r, pid in enumerate(pids)
        ],
    }  # fmt: skip
    frames = [["all_reduce", "torch/distributed/distributed_c10d.py", 3252],
              ["train_step", "train.py", 181], ["<module>", "train.py", 361]]  # fmt: skip
    fr = {"pg": "0", "seq": 5, "op": "all_reduce", "state": "scheduled", "desc": "default_pg",
          "enqueued": 5, "started": None, "completed": 4}  # fmt: skip
    debugserver = {
        "type": "debugserver",
        "t": round(t + 0.2, 3),
        "job": key,
        "trigger": "stalled",
        "via": "server",
        "host": "node-a",
        "outcome": "done",
        "error": None,
        "server": "[::1]:25999",
        "found_by": f"socket of pid {pids[0] + 40} (a child of rank 0)",
        "ranks": [
            *({"rank": r, "host": "node-a", "here": True, "pid": pid, "outcome": "done",
               "error": None, "frames": frames, "collective": "all_reduce", "fr": [fr]}
              for r, pid in enumerate(pids)),
            {"rank": len(pids), "host": "node-b", "here": False, "pid": None, "outcome": "done",
             "error": None, "frames": [["load_next_batch", "train.py", 196],
                                       ["<module>", "train.py", 361]],
             "collective": None, "fr": [{**fr, "seq": 4, "enqueued": 4, "completed": 3}]},
        ],
        "world": len(pids) + 1,
        "elapsed_s": 0.177,
    }  # fmt: skip
    pair = PairResult(
        (0, 1),
        ok=False,
        reason="pair (0, 1): the worker of GPU 1 timed out after 30 s",
        copies=[CopyResult(0, 1, 180.5, 1 << 28, True), CopyResult(1, 0, None, 0, False)],
        allreduce=AllReduceResult((0, 1), None, None, 0, False),
    )
    report = ProbeReport([0, 1], "nccl", 1 << 28, 30.0, pairs=[pair], wall_s=31.2)
    blame = Blame(1, "rank 1 (GPU 1) died; Xid 31 on GPU 1", None, "verdict")
    blamed_probe = report_record(blame, report, key, t + 1.0)
    return [progress, debugserver, blamed_probe]


def _nogpu_records() -> Lines:
    """The trace of a bundle written on a machine without GPUs (`bare`): three samples,
    each a `nogpu` record holding the `die` job's processes (now on no GPU), as the
    bundle's writer makes them."""
    from dataclasses import replace

    from gputui.collect.model import Snapshot
    from gputui.collect.trace.format import nogpu_record
    from gputui.collect.trace.read import read_trace

    last = read_trace(RECORDINGS["die"])[-1]
    procs = tuple(replace(p, gpus=()) for p in last.processes)
    return [
        json.dumps(
            nogpu_record(
                Snapshot(t=last.t + k, processes=procs, source="host", gpu_error="no driver")
            )
        )
        for k in (1.0, 2.0, 3.0)
    ]


def _insert(lines: Lines, rec: dict[str, Any]) -> Lines:
    """`rec` as a line after the last sample line at or before its time."""
    t = rec["t"]
    at = max(i for i, ln in enumerate(lines) if json.loads(ln).get("t", 0) <= t) + 1
    return [*lines[:at], json.dumps(rec), *lines[at:]]


def recordings() -> dict[str, Lines]:
    """Each recording's lines, `die` with the made records in it."""
    out = {name: lines_of(path) for name, path in RECORDINGS.items()}
    for rec in _die_records(out["die"]):
        out["die"] = _insert(out["die"], rec)
    out["bare"] = _nogpu_records()
    return out


def records(all_lines: dict[str, Lines]) -> list[tuple[str, int, dict[str, Any]]]:
    """(recording, line index, record) of every typed record."""
    out = []
    for name, lines in all_lines.items():
        for i, ln in enumerate(lines):
            d = json.loads(ln)
            if "type" in d:
                out.append((name, i, d))
    return out


Path_ = tuple[Any, ...]


def paths(v: Any, at: Path_ = ()) -> Iterator[Path_]:
    """Every key and index inside a record, outermost first (its envelope `type` and `t`
    excluded: a bad envelope is an error of the file, not a skipped record)."""
    if isinstance(v, dict):
        for k, x in v.items():
            if not at and k in ("type", "t"):
                continue
            yield (*at, k)
            yield from paths(x, (*at, k))
    elif isinstance(v, list):
        for i, x in enumerate(v[:8]):  # the first few items of a long list stand for all
            yield (*at, i)
            yield from paths(x, (*at, i))


def _nested(depth: int) -> Any:
    v: Any = "x"
    for i in range(depth):
        v = [v] if i % 2 else {"k": v}
    return v


HOSTILE_VALUES: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**70,
    1e308,
    -1e308,
    1.5,
    float("nan"),
    float("inf"),
    "",
    "x" * 70_000,
    "\x1b]52;c;aGVsbG8=\x07\x1b[2J",
    "\ud800",
    [],
    [None, 1, "a"],
    [[1, 2]] * 5000,
    {},
    {"a": {"b": [1]}},
    _nested(10),
)
"""What a field is given: wrong types, null, huge, negative, nested, escapes (the depth
stays within the reader's nesting bound, so the line itself is readable)."""

DELETE = object()
"""A marker: the field is removed."""


def mutate(rec: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    """A deep copy of `rec` with `path` set to `value` (or removed: DELETE)."""
    out = json.loads(json.dumps(rec))
    d = out
    for k in path[:-1]:
        d = d[k]
    if value is DELETE:
        del d[path[-1]]
    else:
        d[path[-1]] = value
    return out
