"""The recording format: JSON lines, one object per GPU per sample (gzip if the name ends .gz).

The floor is the calibration format of shared/calibration/README.md (t, gpu, util, mem_util,
power_w, sm_mhz, mem_used_mb, temp, pstate, events, pids, ...; phase optional). gputui adds
fields of its own (name, uuid, power_limit_w, mem_total_mb, proc_mem, procs) and reads files
that lack them. Only the rank-related environment variables are ever written, never a whole
environment, so a recording holds no secrets.
"""

from __future__ import annotations

import bisect
import gzip
import io
import json
import math
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from gputui.collect.jobs import RANK_ENV_VARS, group_jobs, rank_from_env
from gputui.collect.model import GpuSample, ProcessInfo, Snapshot
from gputui.errors import GputuiError

# Typed records (a line with a "type" key) are not GPU samples: stack dumps and other
# evidence (common.md, "Recording format"). Only their envelope is checked here; their
# consumers validate the body.
_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
MAX_RECORD_CHARS = 1 << 20  # a stacks record of 8 ranks is ~40 KB; far below this

# Lines of one sample share a time; a gap larger than this starts a new sample even when
# the GPU index does not repeat (a file with one GPU).
_SAME_SAMPLE_S = 0.2

_GPU_FIELDS = {  # file key -> GpuSample attribute
    "util": "util",
    "mem_util": "mem_util",
    "power_w": "power_w",
    "power_limit_w": "power_limit_w",
    "mem_used_mb": "mem_used_mb",
    "mem_total_mb": "mem_total_mb",
    "temp": "temp_c",
    "sm_mhz": "sm_mhz",
    "mem_mhz": "mem_mhz",
    "pstate": "pstate",
    "events": "events",
}


def open_text(path: str | Path, mode: str) -> IO[str]:
    """Open a trace for reading ("r") or writing ("w"), gzip when the name ends in .gz."""
    path = Path(path)
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, mode + "b"), encoding="utf-8")  # type: ignore[arg-type]
    return open(path, mode, encoding="utf-8")


# ---------------------------------------------------------------- writing


def process_to_dict(p: ProcessInfo) -> dict[str, Any]:
    r = p.rank
    env: dict[str, str] = {}
    if r is not None:
        pairs = {
            "RANK": r.rank,
            "LOCAL_RANK": r.local_rank,
            "WORLD_SIZE": r.world_size,
            "LOCAL_WORLD_SIZE": r.local_world_size,
            "TORCHELASTIC_RUN_ID": r.run_id,
            "SLURM_JOB_ID": r.slurm_job_id,
        }
        env = {k: str(v) for k, v in pairs.items() if v is not None}
        if r.master:
            addr, _, port = r.master.rpartition(":")
            env["MASTER_ADDR"], env["MASTER_PORT"] = addr, port
    d: dict[str, Any] = {
        "pid": p.pid,
        "create_time": p.create_time,
        "user": p.user,
        "name": p.name,
        "cmdline": list(p.cmdline),
        "state": p.state,
        "cpu": p.cpu_percent,
        "rss_mb": p.rss_mb,
        "ppid": p.ppid,
        "parent_cmd": p.parent_cmd,
        "gpu_mem_mb": p.gpu_mem_mb,
        "env": env,
    }
    if p.env_error:
        d["env_error"] = p.env_error
    return d


def snapshot_to_lines(snap: Snapshot) -> list[dict[str, Any]]:
    """One dict per GPU; each carries the processes that run on that GPU."""
    lines = []
    for g in snap.gpus:
        d: dict[str, Any] = {"t": round(snap.t, 3), "gpu": g.index}
        if snap.phase:
            d["phase"] = snap.phase
        for key, attr in _GPU_FIELDS.items():
            d[key] = getattr(g, attr)
        d["pids"] = list(g.pids)
        d["name"], d["uuid"] = g.name, g.uuid
        d["proc_mem"] = [[pid, mb] for pid, mb in g.proc_mem_mb]
        d["procs"] = [process_to_dict(p) for p in snap.processes if g.index in p.gpus]
        lines.append(d)
    return lines


class TraceWriter:
    """Appends snapshots to a trace file, flushing each sample so a killed recorder loses
    at most the sample being written."""

    def __init__(self, path: str | Path) -> None:
        try:
            self._f = open_text(path, "w")
        except OSError as e:
            raise GputuiError(f"cannot write {path}: {e.strerror or e}") from e
        self.samples = 0
        self.records = 0

    def write(self, snap: Snapshot) -> None:
        for d in snapshot_to_lines(snap):
            self._f.write(json.dumps(d, separators=(",", ":")) + "\n")
        self._f.flush()
        self.samples += 1

    def write_record(self, d: dict[str, Any]) -> None:
        """A typed record (`{"type": "stacks", "t": ...}`): evidence that belongs to the
        samples around its time. Readers attach it to the first sample at or after `t`."""
        if not isinstance(d.get("type"), str) or not _TYPE.match(d["type"]):
            raise ValueError("a typed record needs a short lowercase 'type'")
        self._f.write(json.dumps(d, separators=(",", ":"), allow_nan=False) + "\n")
        self._f.flush()
        self.records += 1

    def close(self) -> None:
        self._f.close()


# ---------------------------------------------------------------- reading


def _num(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _process_from_dict(d: dict[str, Any], gpu: int) -> ProcessInfo:
    env = d.get("env") or {}
    return ProcessInfo(
        pid=int(d["pid"]),
        create_time=_num(d, "create_time"),
        user=d.get("user"),
        name=d.get("name"),
        cmdline=tuple(str(a) for a in d.get("cmdline") or ()),
        state=d.get("state"),
        cpu_percent=_num(d, "cpu"),
        rss_mb=_num(d, "rss_mb"),
        ppid=d.get("ppid"),
        parent_cmd=d.get("parent_cmd"),
        gpus=(gpu,),
        gpu_mem_mb=_num(d, "gpu_mem_mb"),
        rank=rank_from_env({k: str(v) for k, v in env.items() if k in RANK_ENV_VARS}),
        env_error=d.get("env_error"),
        live=False,
    )


def _gpu_from_dict(d: dict[str, Any]) -> GpuSample:
    kw: dict[str, Any] = {attr: _num(d, key) for key, attr in _GPU_FIELDS.items()}
    for k in ("pstate", "events"):
        if kw[k] is not None:
            kw[k] = int(kw[k])
    pids = tuple(int(p) for p in d.get("pids") or ())
    proc_mem = tuple((int(p), m) for p, m in d.get("proc_mem") or ())
    return GpuSample(
        index=int(d["gpu"]),
        name=d.get("name"),
        uuid=d.get("uuid"),
        pids=pids,
        proc_mem_mb=proc_mem,
        **kw,
    )


def _build_snapshot(t: float, phase: str | None, rows: list[dict[str, Any]]) -> Snapshot:
    gpus = tuple(sorted((_gpu_from_dict(r) for r in rows), key=lambda g: g.index))
    procs: dict[int, ProcessInfo] = {}
    for r in rows:
        gi = int(r["gpu"])
        listed = {int(p["pid"]): p for p in r.get("procs") or ()}
        mem = {int(p): m for p, m in r.get("proc_mem") or ()}
        for pid in list(listed) + [p for p in r.get("pids") or () if p not in listed]:
            pid = int(pid)
            if pid in listed:
                p = _process_from_dict(listed[pid], gi)
            else:  # calibration files carry bare pids
                p = ProcessInfo(pid=pid, gpus=(gi,), gpu_mem_mb=mem.get(pid), live=False)
            if pid in procs:  # one process on several GPUs
                old = procs[pid]
                p = _merge_gpus(old, p)
            procs[pid] = p
    processes = tuple(sorted(procs.values(), key=lambda p: (p.gpus, p.pid)))
    return Snapshot(
        t=t,
        gpus=gpus,
        processes=processes,
        jobs=group_jobs(processes),
        source="replay",
        phase=phase,
    )


def _merge_gpus(a: ProcessInfo, b: ProcessInfo) -> ProcessInfo:
    from dataclasses import replace

    mem = (a.gpu_mem_mb or 0) + (b.gpu_mem_mb or 0) if (a.gpu_mem_mb or b.gpu_mem_mb) else None
    return replace(a, gpus=tuple(sorted(set(a.gpus) | set(b.gpus))), gpu_mem_mb=mem)


def _iter_rows(
    path: Path, f: Iterable[str], records: list[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """GPU sample rows; typed records are checked and put in `records` instead."""
    for n, line in enumerate(f, 1):
        line = line.strip()
        if not line:
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise GputuiError(f"{path}:{n}: not a JSON line ({e.msg})") from None
        if not isinstance(d, dict):
            raise GputuiError(f"{path}:{n}: expected a JSON object per line")
        if "type" in d:
            records.append(_check_record(path, n, d, len(line)))
            continue
        t, gpu = d.get("t"), d.get("gpu")
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            raise GputuiError(f"{path}:{n}: missing or non-numeric 't'")
        if not isinstance(gpu, int) or isinstance(gpu, bool) or gpu < 0:
            raise GputuiError(f"{path}:{n}: missing or invalid 'gpu' index")
        yield d


def _check_record(path: Path, n: int, d: dict[str, Any], size: int) -> dict[str, Any]:
    kind, t = d.get("type"), d.get("t")
    if not isinstance(kind, str) or not _TYPE.match(kind):
        raise GputuiError(f"{path}:{n}: a typed record needs a short lowercase 'type'")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise GputuiError(f"{path}:{n}: typed record without a finite 't'")
    if size > MAX_RECORD_CHARS:
        raise GputuiError(f"{path}:{n}: typed record longer than {MAX_RECORD_CHARS} characters")
    return d


def _attach(snaps: list[Snapshot], records: list[dict[str, Any]]) -> list[Snapshot]:
    """Each non-meta record goes to the first sample whose time is >= its own (the last
    sample when none is); the meta record's host names every sample's node."""
    if not records:
        return snaps
    meta = next((r for r in records if r["type"] == "meta"), None)
    host = meta.get("host") if meta is not None else None
    host = host if isinstance(host, str) and 0 < len(host) <= 255 else None
    times = [s.t for s in snaps]
    by_snap: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        if r["type"] != "meta":
            i = min(bisect.bisect_left(times, r["t"]), len(snaps) - 1)
            by_snap.setdefault(i, []).append(r)
    out = []
    for i, s in enumerate(snaps):
        if i in by_snap or host:
            s = replace(s, records=tuple(by_snap.get(i, ())), hostname=host or s.hostname)
        out.append(s)
    return out


def read_trace(path: str | Path) -> list[Snapshot]:
    """Read a whole trace into snapshots, oldest first. Raises GputuiError on a bad file."""
    path = Path(path)
    if not path.exists():
        raise GputuiError(f"{path}: no such file")
    if path.is_dir():
        raise GputuiError(f"{path}: is a directory, not a trace file")
    snaps: list[Snapshot] = []
    rows: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    t0 = 0.0
    try:
        with open_text(path, "r") as f:
            for d in _iter_rows(path, f, records):
                if rows and (
                    d["gpu"] in {r["gpu"] for r in rows} or abs(d["t"] - t0) > _SAME_SAMPLE_S
                ):
                    snaps.append(_build_snapshot(t0, rows[0].get("phase"), rows))
                    rows = []
                if not rows:
                    t0 = float(d["t"])
                rows.append(d)
            if rows:
                snaps.append(_build_snapshot(t0, rows[0].get("phase"), rows))
                rows = []
    except EOFError:
        pass  # a gzip recording cut short: keep the complete samples before it
    except (OSError, UnicodeDecodeError, zlib.error) as e:
        raise GputuiError(f"{path}: not a readable trace ({e})") from None
    except (KeyError, TypeError, ValueError) as e:
        raise GputuiError(f"{path}: malformed trace field ({e})") from None
    if not snaps:
        raise GputuiError(f"{path}: no samples in file")
    return _attach(snaps, records)
