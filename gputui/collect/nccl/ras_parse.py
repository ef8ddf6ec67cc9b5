"""Parse NCCL RAS answers (text and JSON) into the model of `ras_model`.

The formats are NCCL's (src/ras/client_support.cc): the JSON writer `rasDumpCommsToJSON`
(2.28.7+) and the text of `rasClientRunInit` / `rasClientRunComms`. The text form lists
details only for the ranks that stand out, under blocks such as

    #0-0 (27a079b828ff1a75) MISMATCH
      Communicator ranks have different AllReduce operation counts
      26 ranks have launched up to operation 6650
      6 ranks have launched up to operation 6649
      Rank 0 -- GPU 0 managed by process 483072 on node 172.16.64.210

so the parser keeps a small context (which block, which count group) while it reads lines.
Lines it does not understand are kept as notes, never dropped silently and never fatal.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from gputui.collect.nccl.ras_model import (
    MAX_COMMS,
    MAX_NOTABLE,
    MAX_NOTES,
    RasAnswer,
    RasComm,
    RasProcess,
    RasRank,
    build_comm,
    norm_hash,
    rank_status,
)


def parse_answer(raw: str) -> RasAnswer:
    """A RAS answer, whatever form it came in. ValueError when it is not one."""
    lines = raw.splitlines()
    notes: list[str] = []
    # Answers to the set-up commands come first: "OK" for SET FORMAT, or, from an NCCL
    # older than 2.28.7, "ERROR: Unknown command SET FORMAT json" (and the text follows).
    while lines and (lines[0].strip() in ("OK", "") or lines[0].startswith(("ERROR:", "SERVER"))):
        line = lines.pop(0).strip()
        if line.startswith("ERROR:"):
            notes.append(line[:200])
    body = "\n".join(lines)
    start = body.lstrip()
    if start.startswith("{"):
        try:
            doc = json.loads(start)
        except json.JSONDecodeError as e:
            raise ValueError(f"RAS answer is not valid JSON ({e.msg} at {e.pos})") from None
        answer = parse_json(doc)
    elif "NCCL version" in body or "Communicators" in body or "Job summary" in body:
        answer = parse_text(body)
    else:
        head = raw.strip().splitlines()[0][:60] if raw.strip() else "nothing"
        raise ValueError(f"not a NCCL RAS answer: {head!r}")
    return replace(answer, notes=tuple(notes) + answer.notes) if notes else answer


# ---------------------------------------------------------------- JSON


def _j_int(d: dict[str, Any], key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _j_bool(d: dict[str, Any], key: str) -> bool | None:
    v = d.get(key)
    return v if isinstance(v, bool) else None


def _j_str(d: dict[str, Any], key: str) -> str | None:
    v = d.get(key)
    return v[:200] if isinstance(v, str) else None


def _json_rank(d: Any, missing: bool = False) -> RasRank | None:
    rank = _j_int(d, "rank") if isinstance(d, dict) else None
    if rank is None:
        return None
    st: dict[str, Any] = d.get("status") if isinstance(d.get("status"), dict) else {}
    counts_in = d.get("collective_counts")
    counts = {}
    if isinstance(counts_in, dict):
        counts = {
            str(k)[:40]: v
            for k, v in list(counts_in.items())[:32]
            if isinstance(v, int) and not isinstance(v, bool)
        }
    host = _j_str(d, "host")
    r = RasRank(
        rank=rank,
        host=None if host == "unknown" else host,
        pid=_j_int(d, "pid"),
        cuda_dev=_j_int(d, "cuda_dev"),
        nvml_dev=_j_int(d, "nvml_dev"),
        init_state=_j_int(st, "init_state"),
        async_error=_j_int(st, "async_error"),
        finalize_called=_j_bool(st, "finalize_called"),
        destroy_flag=_j_bool(st, "destroy_flag"),
        abort_flag=_j_bool(st, "abort_flag"),
        counts=counts,
        missing=missing,
        unresponsive=_j_bool(st, "unresponsive"),
        dead=_j_bool(st, "considered_dead"),
    )
    return r if missing else replace(r, status=rank_status(r))


def parse_json(doc: Any) -> RasAnswer:
    """The JSON form (`SET FORMAT json` + `VERBOSE STATUS`, NCCL >= 2.28.7)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("communicators", []), list):
        raise ValueError("RAS JSON answer: expected an object with a communicators list")
    comms = []
    for c in doc.get("communicators", [])[:MAX_COMMS]:
        if not isinstance(c, dict):
            continue
        ranks = [r for r in map(_json_rank, c.get("ranks") or []) if r is not None]
        missing = [
            r for r in (_json_rank(m, missing=True) for m in c.get("missing_ranks") or []) if r
        ]
        h = norm_hash(_j_str(c, "hash") or "?")
        comms.append(build_comm(h, _j_int(c, "size"), ranks, missing))
    ras = doc.get("ras")
    if not isinstance(ras, dict):
        ras = {}
    ct = ras.get("collection_time_sec")
    return RasAnswer(
        format="json",
        nccl_version=_j_str(doc, "nccl_version"),
        comms=tuple(comms),
        timeouts=_j_int(ras, "timeouts_count") or 0,
        collection_s=float(ct)
        if isinstance(ct, (int, float)) and not isinstance(ct, bool)
        else None,
        notes=("more communicators than shown",) if len(doc["communicators"]) > MAX_COMMS else (),
    )


# ---------------------------------------------------------------- text

_VERSION = re.compile(r"^NCCL version (\S+)")
_COMMS_TIME = re.compile(r"^Communicators\.\.\.\s*\(([\d.]+)s\)")
_TABLE_ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$"
)
_COMM_HEAD = re.compile(r"^#(\d+)-(\d+) \(([0-9a-fA-Fx]+)\) ([A-Z]+)\s*$")
_GPU = (
    r"GPU (?P<cuda>\d+)(?: \(NVML (?P<nvml>\d+)\))?"
    r" managed by process (?P<pid>\d+) on node (?P<host>\S+)"
)
_RANK_GPU = re.compile(r"^Rank (\d+)(?P<what>.*?) -- " + _GPU + r"\s*$")
_RANK_NOINFO = re.compile(r"^Rank (\d+)(?P<what>.*?) -- \[process information not found\]")
_PROCESS = re.compile(r"^Process (\d+) on node (\S+) managing GPUs? (.+)$")
_OPS_DIFFER = re.compile(r"^Communicator ranks have different (\w+) operation counts")
_N_AT = re.compile(r"^(\d+) ranks have launched up to operation (\d+)")
_N_NONE = re.compile(r"^(\d+) ranks have not launched any operations")
_ONE_AT = re.compile(r"^ has launched up to operation (\d+)$")
_N_STATUS = re.compile(r"^(\d+) ranks have status (\w+)")
_ONE_STATUS = re.compile(r"^ has status (\w+)$")
_N_REPORTED = re.compile(r"^(\d+) ranks reported (.+)$")
_ONE_REPORTED = re.compile(r"^ reported (.+)$")
_MISSING_ONE = re.compile(r"^The missing ranks?: ([\d, ]+)")  # NCCL 2.24's form
_TIMEOUTS = re.compile(r"^Encountered (\d+) communication timeouts?")


class _TextComm:
    """A communicator being read from the text form."""

    def __init__(self, h: str, group: int) -> None:
        self.hash = h
        self.group = group
        self.status: str | None = None
        self.errors: set[str] = set()
        self.ops: dict[str, list[tuple[int, int]]] = {}
        self.ranks: dict[int, RasRank] = {}
        self.missing: dict[int, RasRank] = {}

    def rank(self, r: int, **kw: Any) -> None:
        old = self.ranks.get(r) or RasRank(rank=r)
        counts = {**old.counts, **kw.pop("counts", {})}
        self.ranks[r] = replace(
            old, counts=counts, **{k: v for k, v in kw.items() if v is not None}
        )

    def build(self, size: int | None, reporting: int | None, status: str | None) -> RasComm:
        errors = sorted(self.errors)
        return RasComm(
            hash=self.hash,
            size=size,
            reporting=reporting,
            status=status or self.status,
            errors=",".join(errors) or None,
            ops={op: sorted(d, key=lambda kv: (-kv[1], -kv[0])) for op, d in self.ops.items()},
            ranks=tuple(sorted(self.ranks.values(), key=lambda r: r.rank))[:MAX_NOTABLE],
            missing=tuple(sorted(self.missing.values(), key=lambda r: r.rank))[:MAX_NOTABLE],
            dropped=max(0, len(self.ranks) - MAX_NOTABLE),
        )


def _where(m: re.Match[str]) -> dict[str, Any]:
    cuda, nvml, pid, host = m.group("cuda"), m.group("nvml"), m.group("pid"), m.group("host")
    return {
        "cuda_dev": int(cuda),
        "nvml_dev": int(nvml) if nvml is not None else int(cuda),
        "pid": int(pid),
        "host": host,
    }


def parse_text(text: str) -> RasAnswer:  # noqa: C901 - one pass over a line-oriented format
    """The text form (`STATUS` / `VERBOSE STATUS`, NCCL >= 2.24)."""
    version = None
    collection_s = None
    totals: tuple[int, ...] = ()
    table: list[tuple[str, ...]] = []
    comms: dict[str, _TextComm] = {}
    missing_procs: list[RasProcess] = []
    dead_procs: list[RasProcess] = []
    notes: list[str] = []
    timeouts = 0
    section = None  # "errors" | "warnings"
    block: str | None = None  # INCOMPLETE | DEAD | TIMEOUT | COMM
    comm: _TextComm | None = None
    group: dict[str, Any] = {}  # what a bare "Rank R -- GPU ..." line belongs to
    lines = text.splitlines()
    for i, raw in enumerate(lines):
        line = raw.strip()
        if not line or set(line) == {"="}:
            continue
        if m := _VERSION.match(line):
            version = m.group(1)
            continue
        if m := _COMMS_TIME.match(line):
            collection_s = float(m.group(1))
            continue
        if "(total)" in line and i + 1 < len(lines):
            nums = lines[i + 1].split()
            if nums and all(n.isdigit() for n in nums):
                totals = tuple(int(n) for n in nums)
            continue
        if line in ("Errors", "Warnings"):
            section, block, comm, group = line.lower(), None, None, {}
            continue
        if section is None:
            if m := _TABLE_ROW.match(raw):
                table.append(m.groups())
            continue
        if line in ("INCOMPLETE", "DEAD", "TIMEOUT"):
            block, comm, group = line, None, {}
            continue
        if m := _COMM_HEAD.match(line):
            h = norm_hash(m.group(3))
            comm = comms.setdefault(h, _TextComm(h, int(m.group(1))))
            comm.errors.add(m.group(4))
            block, group = "COMM", {"kind": m.group(4)}
            continue
        if block in ("INCOMPLETE", "DEAD") and (m := _PROCESS.match(line)):
            p = RasProcess(pid=int(m.group(1)), host=m.group(2), gpus=m.group(3))
            (dead_procs if block == "DEAD" else missing_procs).append(p)
            continue
        if block in ("INCOMPLETE", "DEAD") and ("job process" in line or "[could not" in line):
            continue
        if block == "TIMEOUT" and (m := _TIMEOUTS.match(line)):
            timeouts += int(m.group(1))
            continue
        if block == "COMM" and comm is not None and _comm_line(comm, line, group):
            continue
        if len(notes) < MAX_NOTES:
            notes.append(line[:200])
    rows = {int(row[0]): row for row in table}
    built = []
    for c in list(comms.values())[:MAX_COMMS]:
        row = rows.get(c.group)
        size = int(row[4]) if row else None
        built.append(c.build(size, None, row[6] if row else None))
    if not built and table:  # nothing stood out: one entry per summary row, for the totals
        built = [
            RasComm(
                hash=f"group-{g[0]}",
                size=int(g[4]),
                reporting=None,
                status=g[6],
                errors=g[7],
            )
            for g in table[:MAX_COMMS]
        ]
    dead_pids = {p.pid for p in dead_procs}
    built = [
        replace(
            c, missing=tuple(replace(m, dead=True) if m.pid in dead_pids else m for m in c.missing)
        )
        for c in built
    ]
    nodes = totals[0] if totals else None
    procs = totals[3] if len(totals) == 5 else totals[1] if len(totals) == 3 else None
    gpus = totals[4] if len(totals) == 5 else totals[2] if len(totals) == 3 else None
    return RasAnswer(
        format="text",
        nccl_version=version,
        nodes=nodes,
        processes=procs,
        gpus=gpus,
        comms=tuple(built),
        missing_processes=tuple(missing_procs[:MAX_NOTABLE]),
        dead_processes=tuple(dead_procs[:MAX_NOTABLE]),
        timeouts=timeouts,
        collection_s=collection_s,
        notes=tuple(notes),
    )


def _count_line(line: str) -> tuple[int, int] | None:
    """(ranks, value) of a count line: `N ranks at V`, or `N ranks none` (value 0)."""
    if at := _N_AT.match(line):
        return int(at.group(1)), int(at.group(2))
    if none := _N_NONE.match(line):
        return int(none.group(1)), 0
    return None


def _comm_line(comm: _TextComm, line: str, group: dict[str, Any]) -> bool:  # noqa: C901
    """Fold one line of a `#x-y (hash) KIND` block into the communicator; False if unknown."""
    if m := _OPS_DIFFER.match(line):
        group.clear()
        group.update(kind="ops", op=m.group(1))
        comm.ops.setdefault(m.group(1), [])
        return True
    if line.startswith("Communicator ranks have different status"):
        group.clear()
        group.update(kind="status")
        return True
    if (at := _count_line(line)) is not None:
        n, value = at
        if "op" in group:
            comm.ops[group["op"]].append((value, n))
            group["value"] = value
        return True
    if m := _N_STATUS.match(line):
        group["status"] = m.group(2)
        return True
    if m := _N_REPORTED.match(line):
        group["error"] = m.group(2)
        return True
    if line.startswith(("Missing communicator data from", "Initialization error")):
        group["kind"] = "missing" if line.startswith("Missing") else "init"
        return True
    if line.startswith("Asynchronous error"):
        group["kind"] = "async"
        return True
    if m := _MISSING_ONE.match(line):
        for r in re.findall(r"\d+", m.group(1)):
            comm.missing[int(r)] = RasRank(rank=int(r), missing=True, unresponsive=True)
        return True
    m = _RANK_GPU.match(line) or _RANK_NOINFO.match(line)
    if m is None:
        return False
    r, what = int(m.group(1)), m.group("what")
    where = _where(m) if m.re is _RANK_GPU else {}
    kind = group.get("kind")
    if kind == "missing":
        comm.missing[r] = RasRank(rank=r, missing=True, unresponsive=True, **where)
        return True
    if kind == "ops":
        one = _ONE_AT.match(what)
        count: int | None = group.get("value")
        if one or "not launched" in what:
            count = int(one.group(1)) if one else 0
            comm.ops[group["op"]].append((count, 1))
        if count is not None:
            comm.rank(r, counts={group["op"]: count}, **where)
        return True
    if kind == "status":
        one = _ONE_STATUS.match(what)
        comm.rank(r, status=one.group(1) if one else group.get("status"), **where)
        return True
    if kind in ("init", "async"):
        one = _ONE_REPORTED.match(what)
        err = one.group(1) if one else group.get("error")
        what = "an initialization" if kind == "init" else "an asynchronous"
        comm.rank(r, error=f"{what} error: {err}", **where)
        return True
    comm.rank(r, **where)
    return True
