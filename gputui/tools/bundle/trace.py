"""The bundle's trace.jsonl.gz: the samples and every evidence record, so it replays to the
verdict the bundle was written with.

Why the records: a verdict's headline comes from its evidence (the stacks py-spy took, NCCL
RAS answers, the flight recorder, GPU health, a rank's last words, a rendezvous), and a replay
(`gputui check --replay BUNDLE/trace.jsonl.gz`) has only what the file holds. A trace of
samples alone replays to the NVML picture ("GPU 0 spins") where the bundle said "rank 1 is in
<module> (worker2.py:37)". So every record goes in: those the samples carry (a replay's), those
the Watcher gathered live (`records`), and the bundle's own stack dump.

Where each record goes: the reader attaches a record to the first sample at or after its time
(gputui.collect.trace.read), so each is written just before that sample, or after the last
one; the replay then finds it on the same sample as before. The trace's `meta` names the node
the samples are of (the recorded node for a replay), not the machine that wrote the bundle.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gputui.collect.model import Snapshot
from gputui.collect.trace.format import TraceWriter, nogpu_record
from gputui.jsonout import dumps
from gputui.redact import redact_argv, redact_text


def redacted_snapshot(s: Snapshot) -> Snapshot:
    """Live snapshots are redacted when read; a replayed file is anyone's: redact it again.
    Its records are written as they are: gputui's gatherers redact what they read."""
    procs = tuple(
        replace(
            p,
            cmdline=tuple(redact_argv(p.cmdline, p.name)),
            parent_cmd=redact_text(p.parent_cmd) if p.parent_cmd else p.parent_cmd,
        )
        for p in s.processes
    )
    return replace(s, processes=procs, records=())


def _time(rec: dict[str, Any]) -> float | None:
    t = rec.get("t")
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def all_records(
    snapshots: Sequence[Snapshot], extra: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The samples' records and `extra`, each once (a replay's Watcher holds the very records
    its samples carry), oldest first; records without a time cannot be placed and are left
    out (the reader would refuse them)."""
    seen: set[str] = set()
    out: list[tuple[float, dict[str, Any]]] = []
    for rec in [r for s in snapshots for r in s.records] + list(extra):
        t = _time(rec) if isinstance(rec, dict) else None
        if t is None:
            continue
        key = dumps(rec, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append((t, rec))
    out.sort(key=lambda x: x[0])
    return [r for _, r in out]


def write_trace(
    path: Path, snapshots: Sequence[Snapshot], records: Sequence[dict[str, Any]], host: str
) -> list[str]:
    """Write the samples and `records` (oldest first) to `path`; the notes to keep (a record
    the reader would refuse is left out and said). GputuiError when the disk refuses."""
    notes: list[str] = []
    w = TraceWriter(path, host=host)
    try:
        i = 0

        def put(rec: dict[str, Any]) -> None:
            try:
                w.write_record(rec)
            except ValueError as e:  # too large, or an envelope the reader refuses
                notes.append(f"trace.jsonl.gz: a {rec.get('type')!s:.40} record left out ({e})")

        # A machine without GPUs: its samples have no GPU line to be, so each is a `nogpu`
        # record (why, and the host processes) that replays as a sample. Only when no sample
        # has GPUs: a GPU node's moment without readings stays what it always was.
        bare = not any(s.gpus for s in snapshots)
        for s in snapshots:
            while i < len(records) and (_time(records[i]) or 0.0) <= s.t:
                put(records[i])
                i += 1
            if bare:
                put(nogpu_record(redacted_snapshot(s)))
            else:
                w.write(redacted_snapshot(s))
        for rec in records[i:]:  # after the last sample: the reader gives them to it
            put(rec)
    except BaseException:
        w.abandon()
        raise
    w.close()
    return notes
