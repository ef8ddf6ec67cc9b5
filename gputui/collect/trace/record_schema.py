"""The shape of every typed record a recording may carry, checked once when it is read.

A recording is untrusted input (gputui.collect.trace.schema). Its GPU lines are checked field
by field as they are read; its typed records (`{"type": ..., "t": ..., ...}`: the evidence
gathered at a stall, GPU health, the rendezvous watch) are checked here, against one table,
SCHEMAS, before anything reads them. A record that does not fit is skipped by the reader with
one line (counted; the first few are named), never a traceback later in a consumer: a
`rendezvous` record whose `jobs` was a number crashed every command that replayed it.

The shapes are those the writers produce (gputui.tools.gather.*, gputui.collect.nvml.health,
gputui.watch.ras_poll, gputui.watch.watcher); where a model of its own
parses a part (a RAS answer: gputui.collect.nccl.ras_model; a stack dump's ranks:
gputui.collect.frames), that parser is the check, so the reader and the consumer can never
disagree. A record of a type not listed here is kept as it is: nothing reads it.

`problem(kind, record)` returns why a record does not fit (`jobs: a number, expected a
list`), or None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputui.collect.frames import MAX_RANKS as MAX_STACK_RANKS
from gputui.collect.frames import RankStack
from gputui.collect.nccl.ras_model import answer_from_dict
from gputui.collect.trace.gpu_line import process
from gputui.collect.trace.record_spec import (
    Bool,
    Int,
    List,
    Map,
    Num,
    Obj,
    OneOf,
    Parsed,
    Spec,
    Str,
    Tuple,
)
from gputui.collect.trace.schema import RECORD_TYPE, reading, sample_time, text
from gputui.errors import GputuiError

T_MAX = 4_102_444_800.0  # 2100-01-01, as trace_schema.T_MAX (a time formatted as a date)
PID = Int(1, 4_194_304)  # PID_MAX_LIMIT on 64-bit Linux
RANK = Int(0, 1 << 24)
GPU = Int(0, 1 << 16)
TIME = Num(0, T_MAX)
SECONDS = Num(0, 366 * 86400)
COUNT = Int(0, 2**63)
NAME = Str(4096)  # a job key, a host, a path, a short message
TEXT = Str(64 * 1024)  # a log tail, an error file (the writers keep 16 KiB)
MAX_RANKS = 1024  # ranks of a job on one node listed in a record (gputui.diagnose.gone.explain)
MAX_LIST = 4096
MAX_HOST_PROCS = 256  # processes a `nogpu` sample keeps (gputui.collect.trace.format.nogpu_record)

# ---------------------------------------------------------------- the parts


def _stack_ranks(v: Any) -> None:
    if not isinstance(v, list) or len(v) > MAX_STACK_RANKS:
        raise ValueError(f"a list of at most {MAX_STACK_RANKS} rank entries")
    for r in v:
        RankStack.from_json(r)


STACK_RANKS = Parsed(_stack_ranks, "a list of rank stacks")


def _host_procs(v: Any) -> None:
    """A `nogpu` record's processes: each as a GPU line's `procs` entry is read (its
    secrets redacted there), so the reader that makes them processes cannot fail."""
    if not isinstance(v, list) or len(v) > MAX_HOST_PROCS:
        raise ValueError(f"a list of at most {MAX_HOST_PROCS} processes")
    for entry in v:
        try:
            process(entry, 0, "procs")
        except GputuiError as e:
            raise ValueError(str(e).removeprefix("procs: ")) from None


HOST_PROCS = Parsed(_host_procs, "a list of processes")
RAS_ANSWER = Parsed(answer_from_dict, "a RAS answer")

RAS_QUERY = Obj(
    {
        "outcome": Str(40),
        "t": TIME,
        "latency_s": SECONDS,
        "nbytes": COUNT,
        "error": NAME,
        "listener": NAME,  # whose socket answered (gputui.collect.nccl.ras.vet_listener)
        "answer": RAS_ANSWER,
    }
)
RAS_PART = Obj(
    {
        "env": Map(Str(4096), 64),
        "nccl": Obj({"loaded": Bool(), "version": Str(64)}),
        "interval_s": SECONDS,
        "queries": List(RAS_QUERY, 16),
    }
)
RANK_SET = OneOf(List(Int(-(2**31), 2**31), MAX_LIST), Str(4096))  # {1,2} as text, or ints
FLIGHTREC_FINDING = Obj(
    {
        "kind": Str(40),
        "seq": OneOf(Str(64), Int(-(2**63), 2**63)),
        "collective": Str(256),
        "group": Str(256),
        "frame": Str(1024),
        "error": TEXT,
        "missing_ranks": RANK_SET,
        "expected_ranks": RANK_SET,
        "missing_dumps": RANK_SET,
        "world_size": OneOf(Str(64), COUNT),
        "state": Str(256),
        "record": OneOf(Str(64), COUNT),
    }
)
FLIGHTREC_PART = Obj(
    {
        "outcome": Str(40),
        "error": TEXT,
        "pipe": NAME,
        "dump_prefix": NAME,
        "findings": List(FLIGHTREC_FINDING, 64),
        "dumps": List(OneOf(Int(-(2**31), 2**31), Str(256)), MAX_LIST),
    }
)
LOCAL_RANKS = List(Obj({"pid": PID, "rank": RANK, "gpus": List(GPU, 256)}), MAX_RANKS)

STREAM = Obj({"kind": Str(500), "path": Str(4096), "holder": Str(500)})
KERNEL_LINE = Tuple(Num(-1e12, 1e12), Str(4096))
LASTWORDS_RANK = Obj(
    {
        "pid": PID,
        "rank": RANK,
        "gone": Bool(),
        "seen": Bool(),
        "gpus": List(GPU, 256),
        "create_time": TIME,
        "stdout": STREAM,
        "stderr": STREAM,
        "cwd": NAME,
        "core_limit": Str(64),
        "log": NAME,
        "tail": TEXT,
        "error": NAME,
        "error_file": NAME,
        "error_file_text": TEXT,
        "kernel": List(KERNEL_LINE, 256),
        "core": NAME,
        # A rank gone before gputui started (gputui.tools.gather.late_words): no pid, maybe.
        "late": Bool(),
        "held_by": NAME,
        "died_at": TIME,
        "dated_by": Str(200),
        "looked_in": List(NAME, 64),
    },
)

XID_EVENT = Obj(
    {
        "t": Num(-1e12, 1e12),
        "xid": Int(0, 99_999),
        "source": Str(16),
        "gpu": Int(0, 1 << 16),
        "pci": Str(64),
        "pid": Int(0, 1 << 22),
        "name": Str(256),
        "meaning": Str(1024),
        "kind": Str(64),
        "text": Str(4096),
    },
    required=("t", "xid"),
)
COUNTER = OneOf(Bool(), COUNT)  # flags (lost, remap_pending) and counts (ECC, remaps)
GPU_COUNTERS = Obj(
    {
        "lost": Bool(),
        "remap_pending": Bool(),
        "remap_failure": Bool(),
        "ecc_uncorrected_volatile": COUNT,
        "ecc_uncorrected_aggregate": COUNT,
        "remap_corr": COUNT,
        "remap_uncorr": COUNT,
        "pcie_replay": COUNT,
        "na": Map(Str(1024), 64),
    }
)

HERE = Obj({"pid": PID, "rank": RANK, "create_time": TIME})
LISTENER = Tuple(PID, Str(256), Str(256))  # [pid or null, address, name or null]
RENDEZVOUS_JOB = Obj(
    {
        "job": NAME,
        "world": Int(0, 1 << 24),
        "here": List(HERE, MAX_RANKS),
        "missing_ranks": List(RANK, MAX_RANKS),
        "missing_count": Int(0, 1 << 24),
        "since": TIME,
        "agent": Obj({"pid": PID, "nnodes": Str(64)}),
        "master_addr": Str(256),
        "master_port": Int(0, 65535),
        "master_local": Bool(),
        "listeners": List(LISTENER, 64),
        "frame": Str(1024),
        "no_stack": NAME,
    }
)

# ---------------------------------------------------------------- the records

_ENVELOPE: dict[str, Spec] = {"job": NAME, "trigger": Str(64)}

SCHEMAS: dict[str, Obj] = {
    "meta": Obj({"host": Str(255), "gputui": Str(64), "interval": SECONDS}),
    "stacks": Obj(
        {**_ENVELOPE, "tool": Str(64), "elapsed_s": SECONDS, "ranks": STACK_RANKS},
        required=("ranks",),
    ),
    "nccl": Obj(
        {
            **_ENVELOPE,
            "local": LOCAL_RANKS,
            "problems": List(NAME, 256),
            "ras": RAS_PART,
            "flightrec": FLIGHTREC_PART,
            "error": NAME,
        }
    ),
    "ras": Obj({**_ENVELOPE, "local": LOCAL_RANKS, "ras": RAS_PART, "error": NAME}),
    "health": Obj(
        {
            "started": TIME,
            "counters": Map(GPU_COUNTERS, 256, keys=r"\d{1,5}"),
            "events": List(XID_EVENT, 1000),
            "notes": List(Str(4096), 64),
        }
    ),
    "rendezvous": Obj({"jobs": List(RENDEZVOUS_JOB, 256)}, required=("jobs",)),
    "lastwords": Obj(
        {
            **_ENVELOPE,
            "core_pattern": NAME,
            "kernel_error": NAME,
            "ranks": List(LASTWORDS_RANK, MAX_RANKS),
        },
        required=("ranks",),
    ),
    "error": Obj({**_ENVELOPE, "error": NAME}),
    # A sample of a machine without GPUs (a bundle of the no-GPU dashboard or `gputui
    # bundle` there): why there are none, and the host processes shown.
    "nogpu": Obj({"error": NAME, "procs": HOST_PROCS}),
    # The blamed GPU's pair probe (gputui.probe.blamed), joined to the verdict.
    "blamed_probe": Obj(
        {
            "job": NAME,
            "gpu": GPU,
            "link": Int(0, 1 << 16),
            "why": NAME,
            "source": Str(64),
            "outcome": Str(32),
            "error": NAME,
            "held_by": List(PID, MAX_RANKS),
            "backend": Str(16),
            "devices": List(GPU, 256),
            "wall_s": SECONDS,
            "pairs": List(
                Obj(
                    {
                        "pair": List(GPU, 2),
                        "ok": Bool(),
                        "gbps": Num(0, 1e6),
                        "busbw_gbps": Num(0, 1e6),
                        "reason": NAME,
                    }
                ),
                256,
            ),
        },
        required=("gpu",),
    ),
}
"""Every record type gputui writes, and its shape. `grep '"type":' gputui` finds the
writers; tests/test_record_schema.py checks that each writer's record fits."""


def _progress(record: dict[str, Any]) -> str | None:
    from gputui.collect.procs.progress import check_record

    return check_record(record)


def _debugserver(record: dict[str, Any]) -> str | None:
    from gputui.collect.nccl.debugserver_parse import ranks_of_record

    try:
        ranks_of_record(record)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        return str(e)[:120] or "not a debugserver record"
    return None


# Record types whose own module holds the check (it knows the shape best, and reads it).
WHOLE: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "progress": _progress,
    "debugserver": _debugserver,
}


KINDS = (*SCHEMAS, *WHOLE)


def problem(kind: str, record: dict[str, Any]) -> str | None:
    """Why `record` (its envelope already checked) does not fit its type's shape, or None.
    A type not in SCHEMAS or WHOLE fits: nothing reads it."""
    whole = WHOLE.get(kind)
    if whole is not None:
        return whole(record)
    schema = SCHEMAS.get(kind)
    return None if schema is None else schema.problem(record)


# ---------------------------------------------------------------- the envelope


def record(d: dict[str, Any], where: str) -> tuple[str, float]:
    """Check a typed record's envelope: (type, t). The body's shape is checked by the reader
    against SCHEMAS (`problem`); a body that does not fit is skipped, not fatal."""
    kind = d.get("type")
    if not isinstance(kind, str) or not RECORD_TYPE.fullmatch(kind):
        raise GputuiError(f"{where}: record 'type' must be a short lower-case word")
    return kind, sample_time(d.get("t"), where)


@dataclass(frozen=True)
class Meta:
    """The `meta` record `gputui record` writes first: where and how it was recorded."""

    host: str | None
    version: str | None
    interval: float | None


def meta(d: dict[str, Any], where: str) -> Meta:
    interval, _ = reading(d, "interval", where, 0, 366 * 86400)
    return Meta(
        host=text(d, "host", where, 255),
        version=text(d, "gputui", where, 64),
        interval=interval,
    )


__all__ = ["KINDS", "SCHEMAS", "Meta", "meta", "problem", "record"]
