"""What one NCCL RAS answer says, in one shape for its text and its JSON form.

NCCL's RAS thread (NCCL >= 2.24) answers `STATUS` / `VERBOSE STATUS` in text, and since
2.28.7 in JSON after `SET FORMAT json`. The JSON lists every rank; the text lists ranks only
where they stand out (a count behind the others, an error, a missing rank). Both are folded
into this model, which keeps only what a diagnosis needs: per communicator, how many ranks
reached each collective count, and the ranks that stand out, with host, pid and GPU. A job of
thousands of ranks therefore still makes a record of a few kilobytes, which is what goes into
a recording (`{"type": "nccl", ...}`) and comes back in a replay through `from_dict`, so the
reader of a record never trusts its shape: `answer_from_dict` validates every field.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

# A rank is "notable" (kept in full) when it stands out; at most this many per communicator.
MAX_NOTABLE = 64
MAX_COMMS = 32
MAX_NOTES = 40
# Communicators this small keep every rank, so a 2-rank job names both.
KEEP_ALL_RANKS = 16


@dataclass(frozen=True)
class RasRank:
    """One rank of a communicator as RAS saw it (fields the answer did not give are None)."""

    rank: int
    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    status: str | None = None  # RUNNING | INIT | FINALIZE | ABORT | NOCOMM
    init_state: int | None = None  # ncclResult_t: 0 ok, 7 in progress, else an error
    async_error: int | None = None
    error: str | None = None  # NCCL's words for an error, e.g. "Remote process error"
    finalize_called: bool | None = None
    destroy_flag: bool | None = None
    abort_flag: bool | None = None
    counts: dict[str, int] = field(default_factory=dict)  # collective type -> ops launched
    missing: bool = False  # listed among the communicator's missing ranks
    unresponsive: bool | None = None
    dead: bool | None = None

    @property
    def gpu(self) -> int | None:
        """The NVML index (what gputui calls the GPU), else the CUDA one."""
        return self.nvml_dev if self.nvml_dev is not None else self.cuda_dev

    def where(self) -> str:
        """'node-17, pid 4242, GPU 3': as much as is known."""
        parts = []
        if self.host:
            parts.append(self.host)
        if self.pid is not None and self.pid >= 0:
            parts.append(f"pid {self.pid}")
        if self.gpu is not None and self.gpu >= 0:
            parts.append(f"GPU {self.gpu}")
        return ", ".join(parts)


@dataclass(frozen=True)
class RasProcess:
    """A job process the text form names in its INCOMPLETE or DEAD list."""

    pid: int
    host: str
    gpus: str  # as NCCL prints them: "5" or "0,1 (NVML 2,3)"


@dataclass(frozen=True)
class RasComm:
    """One communicator: how far its ranks got, and the ranks that stand out."""

    hash: str
    size: int | None = None  # ranks in the communicator
    reporting: int | None = None  # ranks that answered
    status: str | None = None  # the text form's Status column (or derived from the ranks)
    errors: str | None = None  # OK | MISMATCH | ERROR | INCOMPLETE, comma-joined
    # collective type -> [(count, number of ranks at that count)], most ranks first
    ops: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    ranks: tuple[RasRank, ...] = ()  # notable ranks (every rank of a small communicator)
    missing: tuple[RasRank, ...] = ()
    dropped: int = 0  # notable ranks left out to keep the record small

    def rank(self, r: int) -> RasRank | None:
        for x in self.ranks:
            if x.rank == r:
                return x
        return None


@dataclass(frozen=True)
class RasAnswer:
    """A whole RAS answer."""

    format: str  # "json" | "text"
    nccl_version: str | None = None
    nodes: int | None = None
    processes: int | None = None
    gpus: int | None = None
    comms: tuple[RasComm, ...] = ()
    missing_processes: tuple[RasProcess, ...] = ()  # INCOMPLETE: no data from them
    dead_processes: tuple[RasProcess, ...] = ()  # DEAD: unreachable for 60 s
    timeouts: int = 0  # RAS's own communication timeouts while gathering
    collection_s: float | None = None
    notes: tuple[str, ...] = ()  # lines of Errors/Warnings that were not understood

    def comm(self, h: str) -> RasComm | None:
        for c in self.comms:
            if c.hash == h:
                return c
        return None

    def pids(self) -> set[int]:
        out = {r.pid for c in self.comms for r in (*c.ranks, *c.missing) if r.pid is not None}
        out |= {p.pid for p in (*self.missing_processes, *self.dead_processes)}
        return out


# ---------------------------------------------------------------- building from all ranks


def norm_hash(h: str) -> str:
    """One spelling for a communicator hash: the text form pads to 16 digits, JSON writes 0x."""
    h = h.strip().lower().removeprefix("0x").lstrip("0")
    return (h or "0")[:32]


def rank_status(r: RasRank) -> str | None:
    """NCCL's own rule (client_support.cc): abort, then finalize/destroy, then init state."""
    if r.abort_flag:
        return "ABORT"
    if r.finalize_called or r.destroy_flag:
        return "FINALIZE"
    if r.init_state is None:
        return None
    return "RUNNING" if r.init_state == 0 else "INIT"


def has_error(r: RasRank) -> bool:
    """An init or async error other than success (0) and in-progress (7)."""
    return any(v not in (None, 0, 7) for v in (r.init_state, r.async_error)) or bool(r.error)


def op_distribution(ranks: list[RasRank]) -> dict[str, list[tuple[int, int]]]:
    """Collective type -> [(count, ranks at it)], the most common count first."""
    ops: dict[str, Counter[int]] = {}
    for r in ranks:
        for op, n in r.counts.items():
            ops.setdefault(op, Counter())[n] += 1
    return {
        op: sorted(c.items(), key=lambda kv: (-kv[1], -kv[0]))
        for op, c in ops.items()  # same order as NCCL: most ranks first, then larger count
    }


def notable(ranks: list[RasRank], ops: dict[str, list[tuple[int, int]]]) -> list[RasRank]:
    """Ranks that stand out: a count other than the most common one, an error, a flag."""
    if len(ranks) <= KEEP_ALL_RANKS:
        return ranks
    mode = {op: dist[0][0] for op, dist in ops.items() if dist}
    out = []
    for r in ranks:
        odd_count = any(r.counts.get(op, v) != v for op, v in mode.items())
        flags = r.abort_flag or r.finalize_called or r.destroy_flag
        if odd_count or has_error(r) or flags or r.status not in (None, "RUNNING"):
            out.append(r)
    return out


def build_comm(
    hash_: str, size: int | None, ranks: list[RasRank], missing: list[RasRank]
) -> RasComm:
    """A communicator from every rank's data (the JSON form)."""
    ops = op_distribution(ranks)
    keep = notable(ranks, ops)
    statuses = {s for s in (r.status for r in ranks) if s}
    errors = []
    if any(len(d) > 1 for d in ops.values()) or len(statuses) > 1:
        errors.append("MISMATCH")
    if any(has_error(r) for r in ranks):
        errors.append("ERROR")
    if missing:
        errors.append("INCOMPLETE")
    order = ("ABORT", "FINALIZE", "RUNNING", "INIT")
    status = next((s for s in order if s in statuses), None)
    return RasComm(
        hash=hash_,
        size=size,
        reporting=len(ranks),
        status=status,
        errors=",".join(errors) or "OK",
        ops=ops,
        ranks=tuple(keep[:MAX_NOTABLE]),
        missing=tuple(missing[:MAX_NOTABLE]),
        dropped=max(0, len(keep) - MAX_NOTABLE) + max(0, len(missing) - MAX_NOTABLE),
    )


# ---------------------------------------------------------------- record form


def _plain(v: Any) -> Any:
    """Tuples as lists, as JSON has them, so a record reads back the same live or replayed."""
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def answer_to_dict(a: RasAnswer) -> dict[str, Any]:
    """The answer as plain JSON, for a record (answer_from_dict reads it back).

    Args:
        a: a parsed RAS answer.

    Returns:
        A JSON-able dict of the answer's fields.
    """
    return _plain(asdict(a))


def _int(v: Any, what: str) -> int | None:
    return None if v is None else _need_int(v, what)


def _need_int(v: Any, what: str) -> int:
    """An integer that must be there (None is refused, as any other non-integer)."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{what}: expected an integer")
    return v


def _key(v: Any, what: str, limit: int) -> str:
    """A short string that must be there: an object's key."""
    if not isinstance(v, str) or len(v) > limit:
        raise ValueError(f"{what}: expected a short string")
    return v


def _str(v: Any, what: str, limit: int = 200) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or len(v) > limit:
        raise ValueError(f"{what}: expected a short string")
    return v


def _bool(v: Any, what: str) -> bool | None:
    if v is None or isinstance(v, bool):
        return v
    raise ValueError(f"{what}: expected true or false")


def _rank_from(d: Any) -> RasRank:
    if not isinstance(d, dict):
        raise ValueError("rank: expected an object")
    counts = d.get("counts") or {}
    if not isinstance(counts, dict) or len(counts) > 32:
        raise ValueError("rank counts: expected a small object")
    return RasRank(
        rank=_need_int(d.get("rank"), "rank"),
        host=_str(d.get("host"), "host"),
        pid=_int(d.get("pid"), "pid"),
        cuda_dev=_int(d.get("cuda_dev"), "cuda_dev"),
        nvml_dev=_int(d.get("nvml_dev"), "nvml_dev"),
        status=_str(d.get("status"), "status", 20),
        init_state=_int(d.get("init_state"), "init_state"),
        async_error=_int(d.get("async_error"), "async_error"),
        error=_str(d.get("error"), "error"),
        finalize_called=_bool(d.get("finalize_called"), "finalize_called"),
        destroy_flag=_bool(d.get("destroy_flag"), "destroy_flag"),
        abort_flag=_bool(d.get("abort_flag"), "abort_flag"),
        counts={_key(k, "op", 40): _need_int(v, "count") for k, v in counts.items()},
        missing=bool(d.get("missing")),
        unresponsive=_bool(d.get("unresponsive"), "unresponsive"),
        dead=_bool(d.get("dead"), "dead"),
    )


def _comm_from(d: Any) -> RasComm:
    if not isinstance(d, dict):
        raise ValueError("communicator: expected an object")
    ops_in = d.get("ops") or {}
    if not isinstance(ops_in, dict) or len(ops_in) > 32:
        raise ValueError("ops: expected a small object")
    ops: dict[str, list[tuple[int, int]]] = {}
    for op, dist in ops_in.items():
        if not isinstance(dist, list) or len(dist) > 4096:
            raise ValueError("ops: expected lists of [count, ranks]")
        pairs: list[tuple[int, int]] = []
        for p in dist:
            if not isinstance(p, list) or len(p) != 2:
                raise ValueError("ops: expected [count, ranks] pairs")
            pairs.append((_need_int(p[0], "count"), _need_int(p[1], "ranks")))
        ops[_key(op, "op", 40)] = pairs
    ranks, missing = d.get("ranks") or [], d.get("missing") or []
    if not isinstance(ranks, list) or not isinstance(missing, list):
        raise ValueError("ranks: expected lists")
    if len(ranks) > 4 * MAX_NOTABLE or len(missing) > 4 * MAX_NOTABLE:
        raise ValueError("ranks: too many")
    return RasComm(
        hash=_str(d.get("hash"), "hash", 64) or "?",
        size=_int(d.get("size"), "size"),
        reporting=_int(d.get("reporting"), "reporting"),
        status=_str(d.get("status"), "status", 40),
        errors=_str(d.get("errors"), "errors", 80),
        ops=ops,
        ranks=tuple(_rank_from(r) for r in ranks),
        missing=tuple(_rank_from(r) for r in missing),
        dropped=_int(d.get("dropped"), "dropped") or 0,
    )


def _process_from(d: Any) -> RasProcess:
    if not isinstance(d, dict):
        raise ValueError("process: expected an object")
    return RasProcess(
        pid=_need_int(d.get("pid"), "pid"),
        host=_str(d.get("host"), "host") or "?",
        gpus=_str(d.get("gpus"), "gpus") or "",
    )


def answer_from_dict(d: Any) -> RasAnswer:
    """The model back from a record. ValueError (one line) when anything is off.

    Args:
        d: a RAS answer as a record holds it (possibly from an untrusted recording).

    Returns:
        The RasAnswer.

    Raises:
        ValueError: anything gputui would not have written (one line).
    """
    if not isinstance(d, dict):
        raise ValueError("RAS answer: expected an object")
    fmt = d.get("format")
    if fmt not in ("json", "text"):
        raise ValueError("RAS answer: format must be json or text")
    lists = {k: d.get(k) or [] for k in ("comms", "missing_processes", "dead_processes", "notes")}
    for k, v in lists.items():
        if not isinstance(v, list) or len(v) > 4 * MAX_NOTABLE:
            raise ValueError(f"RAS answer: {k} must be a short list")
    cs = d.get("collection_s")
    if cs is not None and (isinstance(cs, bool) or not isinstance(cs, (int, float))):
        raise ValueError("RAS answer: collection_s must be a number")
    return RasAnswer(
        format=fmt,
        nccl_version=_str(d.get("nccl_version"), "nccl_version", 40),
        nodes=_int(d.get("nodes"), "nodes"),
        processes=_int(d.get("processes"), "processes"),
        gpus=_int(d.get("gpus"), "gpus"),
        comms=tuple(_comm_from(c) for c in lists["comms"]),
        missing_processes=tuple(_process_from(p) for p in lists["missing_processes"]),
        dead_processes=tuple(_process_from(p) for p in lists["dead_processes"]),
        timeouts=_int(d.get("timeouts"), "timeouts") or 0,
        collection_s=None if cs is None else float(cs),
        notes=tuple(_str(n, "note", 400) or "" for n in lists["notes"]),
    )
