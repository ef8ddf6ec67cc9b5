"""One GPU line of a recording, checked whole: its GPU's readings, its pids and processes.

A line is one GPU of one sample (`{"t":..., "gpu":0, "util":..., "procs":[...]}`); `gpu_row`
turns it into a GpuSample and its ProcessInfo entries by the rule in schema's docstring, each
field through the checks in schema. The grouping of lines into samples is in grouping.py and
read.py; the templates (template.py) read the usual line faster and fall back to this for
any line they cannot vouch for.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from gputui.collect.model import GpuSample, ProcessInfo
from gputui.collect.procs.jobs import RANK_ENV_VARS, rank_from_env
from gputui.collect.procs.owner import owner_from_json
from gputui.collect.trace import schema
from gputui.collect.trace.record_spec import kind_of
from gputui.collect.trace.schema import (
    bounded_list,
    in_range,
    number,
    pid,
    printable,
    reading,
    text,
)
from gputui.errors import GputuiError
from gputui.redact.recorded import recorded_argv, recorded_text


@dataclass
class GpuRow:
    """One validated GPU line: its sample time, GPU and processes, ready to be grouped."""

    t: float
    gpu: GpuSample
    phase: str | None
    procs: dict[int, ProcessInfo] = field(default_factory=dict)  # listed in `procs`
    mem: dict[int, float | None] = field(default_factory=dict)  # `proc_mem` pid -> MiB
    # The template the line was read from (gputui.collect.trace.template), None when it was
    # read in full: rows of one template differ in their readings only.
    source: Any = field(default=None, compare=False, repr=False)


def _optional_reading(
    d: dict[str, Any], key: str, where: str, lo: float, hi: float
) -> float | None:
    return reading(d, key, where, lo, hi)[0]


def _proc_reading(d: dict[str, Any], key: str, where: str) -> float | None:
    return _optional_reading(d, key, where, *schema.PROC_READINGS[key][1:])


def _env(d: dict[str, Any], where: str) -> dict[str, str]:
    env = d.get("env")
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise GputuiError(f"{where}: 'env' is {kind_of(env)}, expected an object of strings")
    if len(env) > schema.MAX_ENV_ENTRIES:
        raise GputuiError(
            f"{where}: 'env' has {len(env)} entries, more than {schema.MAX_ENV_ENTRIES}"
        )
    out = {}
    for k, v in env.items():
        if not isinstance(v, str):
            raise GputuiError(
                f"{where}: env value of {printable(k)[:40]!r} is {kind_of(v)}, expected a string"
            )
        if len(k) > schema.MAX_STR_CHARS or len(v) > schema.MAX_STR_CHARS:
            raise GputuiError(
                f"{where}: an env entry is longer than {schema.MAX_STR_CHARS} characters"
            )
        if k in RANK_ENV_VARS:  # only these are ever written; anything else is ignored
            out[k] = printable(v)
    return out


def _cmdline(d: dict[str, Any], where: str) -> tuple[str, ...]:
    args = bounded_list(d, "cmdline", where, schema.MAX_CMDLINE_ARGS)
    total = 0
    for a in args:
        if not isinstance(a, str):
            raise GputuiError(f"{where}: 'cmdline' holds {kind_of(a)}, expected strings")
        total += len(a)
    if total > schema.MAX_CMDLINE_CHARS:
        raise GputuiError(
            f"{where}: 'cmdline' is longer than {schema.MAX_CMDLINE_CHARS} characters"
        )
    return tuple(printable(a) for a in args)


# A process's static fields repeat on every sample (its pid, command line, rank variables):
# checked once, the result is kept, and a later entry with the same static fields only has
# its readings checked. The key holds the type of each number (4000.0 and True compare equal
# to 4000 and 1, and are not pids), so an entry is only ever reused for one that the full
# check would give the same answer.
_PROCESS_CACHE: dict[tuple[Any, ...], ProcessInfo] = {}
_PROCESS_CACHE_MAX = 4096


def _static_key(d: dict[str, Any], gpu: int) -> tuple[Any, ...] | None:
    cmd, env = d.get("cmdline"), d.get("env")
    if d.get("owner") is not None or type(cmd) not in (list, type(None)):
        return None
    if type(env) not in (dict, type(None)):
        return None
    pid, ct, ppid = d.get("pid"), d.get("create_time"), d.get("ppid")
    return (
        gpu, pid, type(pid), ct, type(ct), ppid, type(ppid),
        d.get("user"), d.get("name"), d.get("parent_cmd"), d.get("env_error"),
        tuple(cmd) if cmd else (), tuple(env.items()) if env else (),
    )  # fmt: skip


def process(d: Any, gpu: int, where: str) -> ProcessInfo:
    """One entry of `procs`: an object with a valid pid; other fields typed and bounded."""
    if not isinstance(d, dict):
        raise GputuiError(f"{where}: 'procs' holds {kind_of(d)}, expected objects")
    key = _static_key(d, gpu)
    try:
        seen = _PROCESS_CACHE.get(key) if key is not None else None
    except TypeError:  # an unhashable value (a list in the command line): the full check
        seen = key = None
    if seen is not None:
        return _with_readings(seen, d, where)
    info = _process(d, gpu, where)
    if key is not None:
        if len(_PROCESS_CACHE) >= _PROCESS_CACHE_MAX:
            _PROCESS_CACHE.clear()
        _PROCESS_CACHE[key] = info
    return info


def _with_readings(base: ProcessInfo, d: dict[str, Any], where: str) -> ProcessInfo:
    """`base` (checked) with this entry's own readings, checked."""
    out = copy.copy(base)
    set_ = object.__setattr__  # a frozen dataclass: a fresh copy is filled in here only
    set_(out, "state", text(d, "state", where))
    for key, (attr, _lo, _hi) in schema.PROC_READINGS.items():
        set_(out, attr, _proc_reading(d, key, where))
    return out


def _process(d: dict[str, Any], gpu: int, where: str) -> ProcessInfo:
    ppid = number(d.get("ppid"), "ppid", where)
    name = text(d, "name", where)
    return ProcessInfo(
        pid=pid(d.get("pid"), "procs[].pid", where),
        create_time=_optional_reading(d, "create_time", where, 0, schema.T_MAX),
        user=text(d, "user", where),
        name=name,
        cmdline=recorded_argv(_cmdline(d, where), name),  # a recording is anyone's file
        state=text(d, "state", where),
        cpu_percent=_proc_reading(d, "cpu", where),
        rss_mb=_proc_reading(d, "rss_mb", where),
        ppid=int(ppid)
        if ppid is not None and in_range(ppid, 0, schema.PID_MAX_LIMIT, True) is None
        else None,
        parent_cmd=recorded_text(text(d, "parent_cmd", where, schema.MAX_CMDLINE_CHARS)),
        gpus=(gpu,),
        gpu_mem_mb=_proc_reading(d, "gpu_mem_mb", where),
        rank=rank_from_env(_env(d, where)),
        env_error=text(d, "env_error", where),
        live=False,
        owner=owner_from_json(d.get("owner")),
    )


def gpu_row(d: dict[str, Any], t: float, index: int, where: str) -> GpuRow:
    """A GPU line (t and gpu already checked) as a GpuSample and its processes."""
    kw: dict[str, Any] = {}
    na: dict[str, str] = {}
    for key, attr, lo, hi, integral in schema.GPU_READINGS:
        if d.get(key) is None:
            kw[attr] = None
            continue
        v, why = reading(d, key, where, lo, hi, integral)
        kw[attr] = v
        if why is not None:
            na[attr] = why
    pids = tuple(
        pid(p, "pids", where) for p in bounded_list(d, "pids", where, schema.MAX_PROCS_PER_GPU)
    )
    mem: dict[int, float | None] = {}
    for pair in bounded_list(d, "proc_mem", where, schema.MAX_PROCS_PER_GPU):
        if not isinstance(pair, list) or len(pair) != 2:
            raise GputuiError(
                f"{where}: 'proc_mem' holds {kind_of(pair)}, expected [pid, MiB] pairs"
            )
        p = pid(pair[0], "proc_mem", where)
        mb = number(pair[1], "proc_mem", where)
        mem[p] = None if mb is None or in_range(mb, 0, schema.MIB_MAX) else float(mb)
    procs: dict[int, ProcessInfo] = {}
    for entry in bounded_list(d, "procs", where, schema.MAX_PROCS_PER_GPU):
        proc = process(entry, index, where)
        procs[proc.pid] = proc
    gpu = GpuSample(
        index=index,
        name=text(d, "name", where),
        uuid=text(d, "uuid", where),
        pids=pids,
        proc_mem_mb=tuple(mem.items()),
        na=na,
        **kw,
    )
    return GpuRow(t=t, gpu=gpu, phase=text(d, "phase", where), procs=procs, mem=mem)
