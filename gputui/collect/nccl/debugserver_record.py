"""The `{"type": "debugserver"}` record: its fields, and each rank's entry in it.

A server's pages (gputui.collect.nccl.debugserver_ask) and a periodic dump on disk
(gputui.collect.nccl.debugserver) make the same record, so both build it here: one rank's
host, local pid, main-thread frames and collective, with its flight recorder per process
group. Every string kept is clipped and redacted: the answer is another program's output,
maybe from another node, and the record is written to files and shown.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from typing import Any

from gputui.collect.frames import MAX_FRAMES, Frame, clip, collective_name
from gputui.collect.nccl import debugserver_parse as parse
from gputui.collect.nccl.debugserver_parse import KIND
from gputui.redact import redact_text


def rank_entry(
    answer: parse.RankAnswer, here: str, local: Mapping[int, int], fr: Mapping[int, Any]
) -> dict[str, Any]:
    """One rank's entry: host, local pid, main-thread frames, its collective, its flight
    recorder per process group."""
    host = answer.host
    on_here = host is not None and host == here
    e: dict[str, Any] = {
        "rank": answer.rank,
        "host": clip(redact_text(host), 253) if host else None,
        "here": on_here,
        "pid": local.get(answer.rank) if on_here else None,
    }
    if answer.text is None:
        e.update(outcome="failed", error=f"the front end could not fetch it (HTTP {answer.status})")
        e["frames"] = []
    else:
        frames = parse.main_frames(parse.threads(answer.text))
        frames = tuple(
            Frame(clip(redact_text(f.function)), clip(redact_text(f.file)), f.line) for f in frames
        )
        e.update(outcome="done" if frames else "empty", error=None)
        if not frames:
            e["error"] = "no Python frame in its answer"
        e["frames"] = [f.to_json() for f in frames[:MAX_FRAMES]]
        e["collective"] = next((n for f in frames if (n := collective_name(f))), None)
    groups = fr.get(answer.rank)
    if groups:
        e["fr"] = groups
    return e


def fr_by_rank(sections: Sequence[parse.RankAnswer]) -> tuple[dict[int, Any], str | None]:
    """Each rank's flight-recorder groups from a JSON page's sections; a problem in words."""
    out: dict[int, Any] = {}
    problem = None
    for s in sections:
        if s.text is None:
            continue
        try:
            groups = parse.fr_groups(parse.bounded_json(s.text))
        except ValueError as e:
            problem = clip(f"rank {s.rank}'s flight recorder: {e}")
            continue
        if groups:
            out[s.rank] = groups
    return out, problem


def new_record(key: str, trigger: str, via: str, t: float, **kw: Any) -> dict[str, Any]:
    """A record with every field at its default (done, no server, no rank), `kw` over them."""
    rec: dict[str, Any] = {
        "type": KIND,
        "t": round(t, 3),
        "job": key,
        "trigger": trigger,
        "via": via,
        "host": clip(socket.gethostname(), 253),
        "outcome": "done",
        "error": None,
        "server": None,
        "found_by": None,
        "ranks": [],
    }
    rec.update(kw)
    return rec


def ranks_part(
    stacks: Sequence[parse.RankAnswer], fr: Mapping[int, Any], local: Mapping[int, int]
) -> list[dict[str, Any]]:
    """The record's `ranks`: one entry per rank's answer, as many as a record keeps."""
    here = socket.gethostname()
    entries = [rank_entry(a, here, local, fr) for a in stacks]
    return list(parse.keep_ranks(entries))
