"""Last words of ranks gone before gputui saw them: read from what survives them.

Called by the lastwords gatherer (gputui.tools.gather.lastwords) at a stall, off the
caller's thread. The ranks it looks for: the local ranks NVML's picture says are missing
(the detector places a never-seen local rank on the GPU of its index), and the ranks of the
job's world that are not alive here (a rank of another node whose lines reach a shared
output file). Where it looks, every read bounded:

- the output files the living ranks and their launchers (parent, grandparent: torchrun's
  agent, srun's step) hold open as stdout and stderr: `[rankN]:` lines, the agent's and
  srun's exit records (gputui.diagnose.gone.late);
- torchelastic's error files of the missing local ranks (TORCHELASTIC_ERROR_FILE of a
  living rank names its own; the others sit beside it, one directory per local rank);
- the kernel log's history (the whole ring): the Xid, segfault or OOM kill of the rank's pid
  (from its launcher's record, or an Xid of a pid no longer alive on the rank's GPU);
- its core file by core_pattern, once its pid is known.

When one of them dates the death (the kernel line, the error file's timestamp, the agent's
Root Cause time, the core's mtime, or the log's last write when its lines end the file), the
entry carries `died_at` and `dated_by`: "rank 1 died 14 min ago: ...".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gputui.collect.procs.rankio import RankIO, Stream, ancestors, program_name, read_tail, stream
from gputui.diagnose.gone.lastwords import parse_error_file, parse_log
from gputui.redact import redact_text

LATE_TAIL = 256 * 1024  # bytes of a survivor's output file read (the traceback may be older)
RECORD_TAIL = 16 * 1024
MAX_FILES = 8
MAX_WORLD = 4096  # candidate ranks looked for at most
MAX_ERROR_DIRS = 64
ERROR_FILE_MAX = 16 * 1024
BORN_SLACK_S = 120.0  # a dead rank was started about when its peers were
# An Xid matched by its GPU alone (no pid known) must come after the job was born, give or
# take this: on the GPU machine an earlier job's Xid on the same GPU, 100 s before, was
# taken for this job's dead rank under the 120 s slack that suits a match by pid.
GPU_XID_SLACK_S = 10.0
PROGRAM_XIDS = (13, 31, 43, 45, 68, 69)  # a program's fault: its process ends


def _offset(ranks: Sequence[Any]) -> tuple[int | None, int | None, int | None]:
    """(global rank of local rank 0, local world size, world size) agreed by the live ranks."""
    offs, lws, ws = set(), set(), set()
    for p in ranks:
        r = p.rank
        if r is None:
            continue
        if r.rank is not None and r.local_rank is not None:
            offs.add(r.rank - r.local_rank)
        if r.local_world_size is not None:
            lws.add(r.local_world_size)
        if r.world_size is not None:
            ws.add(r.world_size)
    one = lambda s: next(iter(s)) if len(s) == 1 else None  # noqa: E731
    return one(offs), one(lws), one(ws)


def _files(ranks: Sequence[Any], tracker: Any) -> list[tuple[str, str]]:
    """(path, who holds it) of every regular file the live ranks and their launchers write
    to as stdout or stderr, each once."""
    out: dict[str, str] = {}
    holders: list[tuple[int, str]] = []
    for p in ranks:
        who = f"rank {p.rank.rank}" if p.rank is not None and p.rank.rank is not None else "pid"
        holders.append((p.pid, f"{who} (pid {p.pid})"))
    for p in ranks:
        for a in ancestors(p.pid):
            if all(a != h for h, _ in holders):
                holders.append((a, f"{program_name(a)} (pid {a})"))
    for pid, who in holders:
        io: RankIO | None = tracker.get(pid) if tracker is not None else None
        streams: list[Stream] = [io.stderr, io.stdout] if io is not None else []
        if not streams or all(s.kind == "unknown" for s in streams):
            streams = [stream(pid, 2), stream(pid, 1)]
        for s in streams:
            if s.kind == "file" and s.path and s.path not in out and len(out) < MAX_FILES:
                out[s.path] = who
    return list(out.items())


# Files named by processes of any user, read as root: never through a link, and a root-only
# file never (gputui.collect.safe_open).
_ANYONE: tuple[None, tuple[int, ...]] = (None, ())


def _read(path: str) -> tuple[str, float | None] | None:
    got = read_tail(path, -1, LATE_TAIL, owner=_ANYONE)
    if got is None:
        return None
    try:
        mtime: float | None = os.stat(path).st_mtime
    except OSError:
        mtime = None
    return got[1].decode("utf-8", "replace").replace("\x00", ""), mtime


def _error_files(ranks: Sequence[Any], tracker: Any) -> dict[int, str]:
    """local rank -> its torchelastic error file, beside a living rank's own
    (`.../attempt_0/<local rank>/error.json`)."""
    out: dict[int, str] = {}
    for p in ranks:
        io = tracker.get(p.pid) if tracker is not None else None
        path = io.error_file if io is not None else None
        if not path:
            continue
        mine, name = os.path.split(path)
        attempt = os.path.dirname(mine)
        try:
            entries = sorted(os.listdir(attempt))[:MAX_ERROR_DIRS]
        except OSError:
            continue
        for d in entries:
            if d.isdigit():
                out.setdefault(int(d), os.path.join(attempt, d, name))
    return out


def late_entries(
    target: Any,
    tracker: Any,
    kernel: list[tuple[float, str]],
    pattern: str | None,
    known: set[int],
    unseen: dict[int, int] | None = None,
) -> list[dict[str, Any]]:
    """One lastwords entry per rank gone before it was seen (or seen nowhere on this node)
    that something here speaks of; `known` are the pids the gatherer has entries for.
    `unseen`: rank -> pid of gone ranks NVML saw but whose outputs were never looked at (they
    died within a sample or two): looked for here too, under their pid."""
    from gputui.diagnose.gone import late as L

    live = [p for p in target.ranks if getattr(p, "live", True)]
    if not live:
        return []
    offset, lws, world = _offset(live)
    alive = {p.rank.rank for p in live if p.rank is not None and p.rank.rank is not None}
    # The local ranks NVML says are missing (the detector placed them on their GPU's index).
    local_missing: dict[int, int | None] = {}  # global rank -> GPU
    for s in target.gone:
        if s.pid is None and s.gpu is not None and offset is not None:
            local_missing[offset + s.gpu] = s.gpu
        elif s.pid is not None and s.rank is not None and s.rank in (unseen or {}):
            local_missing[s.rank] = s.gpu
    here = set(range(offset, offset + lws)) if offset is not None and lws else set()
    born = min((p.create_time for p in live if p.create_time), default=None)
    since = born - BORN_SLACK_S if born is not None else None
    files = [
        (path, who, (text, mtime, L.lines_by_rank(text)))
        for path, who in _files(live, tracker)
        if (got := _read(path)) is not None
        for text, mtime in (got,)
    ]
    exits = [x for _, _, (text, _m, _b) in files for x in L.launcher_exits(text)]
    # A "failed ... local_rank: 1 (pid: P)" line is another node's when a Root Cause block
    # gives P another rank: the block's rank is the one (the local rank is per node).
    by_pid = {x.pid: x.rank for x in exits if x.rank is not None and x.pid}
    exits = [
        replace(x, rank=by_pid[x.pid]) if x.rank is None and x.pid in by_pid else x for x in exits
    ]
    errs = _error_files(live, tracker)
    # The ranks to speak of: this node's missing ones, and any rank of the world that a
    # file's lines or a launcher's record names (never every rank of a large world).
    named = {r for _, _, (_t, _m, by) in files for r in by} | {
        x.rank for x in exits if x.rank is not None
    }
    named |= {offset + lr for lr in errs if offset is not None}
    candidates = set(local_missing) | (here - alive)
    candidates |= {r for r in named if r is not None and r >= 0} - alive
    if world is not None:
        candidates = {r for r in candidates if r < world}
    candidates = set(sorted(candidates)[:MAX_WORLD])
    if not candidates:
        return []
    cwd = next((io.cwd for p in live if (io := tracker.get(p.pid)) and io.cwd), None)
    out = []
    for rank in sorted(candidates):
        e = _entry(rank, local_missing, here, files, exits, errs, offset, since, target, kernel)
        if e is not None and e.get("pid") is None and rank in (unseen or {}):
            e["pid"] = (unseen or {})[rank]  # NVML saw it: its pid is known
        mine = isinstance(e.get("pid"), int) and e["pid"] in known if e else False
        if e is None or (mine and rank not in (unseen or {})):
            continue
        pid = e.get("pid")
        if isinstance(pid, int) and pattern and (rank in here or rank in local_missing):
            from gputui.tools.attach.core import find_core

            core = find_core(pid, cwd, pattern, since)
            e["core"] = core
            if core and core.startswith("/") and "died_at" not in e:
                try:
                    e.update(died_at=round(os.stat(core).st_mtime, 3), dated_by="its core file")
                except OSError:
                    pass
        out.append(e)
    return out


def _entry(
    rank: int,
    local_missing: dict[int, int | None],
    here: set[int],
    files: list[tuple[str, str, tuple[str, float | None, dict[int, list[str]]]]],
    exits: list[Any],
    errs: dict[int, str],
    offset: int | None,
    since: float | None,
    target: Any,
    kernel: list[tuple[float, str]],
) -> dict[str, Any] | None:
    from gputui.diagnose.gone import late as L
    from gputui.diagnose.kernel_events import kernel_events

    local = rank in local_missing or rank in here
    gpu = local_missing.get(rank)
    lr = rank - offset if offset is not None and local else None
    lone = len(local_missing) == 1 and rank in local_missing
    words, tail, log, held, dated = None, "", None, None, None
    for path, who, (text, mtime, by_rank) in files:
        lines = by_rank.get(rank, [])
        if not lines and lone and not by_rank:
            lines = L.strip_launcher(text).splitlines()  # one gone, no prefixes: unmarked
            mine: int | None = None
        else:
            mine = rank
        w = parse_log("\n".join(lines), None)
        if w.exception or w.cuda:
            words, tail, log, held = w, "\n".join(lines), path, who
            if mtime is not None and L.last_region(text, mine):
                dated = (mtime, "the log's last write")
            break
    mine_exits = [
        x
        for x in exits
        if x.rank == rank or (x.rank is None and lr is not None and x.local_rank == lr and local)
    ]
    # torchrun's Root Cause block names the rank; its "failed ... local_rank" line the pid
    exit_ = next((x for x in mine_exits if x.t is not None), None)  # the Root Cause block
    exit_ = exit_ or next(iter(mine_exits), None)
    pid = next((x.pid for x in mine_exits if x.pid), None)
    e: dict[str, Any] = {"pid": pid, "rank": rank, "gone": True, "seen": False, "late": True}
    e["gpus"] = [gpu] if gpu is not None else []
    ktext: list[tuple[float, str]] = []
    if pid is not None:
        ktext = [(k.t, k.text) for k in kernel_events(kernel, pid, since)]
    elif gpu is not None:
        born = None if since is None else since + BORN_SLACK_S
        xid = _xid_on(target, gpu, None if born is None else born - GPU_XID_SLACK_S)
        if xid is not None:
            pid = e["pid"] = xid[0]
            ktext = [(xid[1], xid[2])]
    if ktext:
        e["kernel"] = [[round(t, 3), redact_text(x)] for t, x in ktext[-20:]]
    err_path = errs.get(lr) if lr is not None else None
    if exit_ is not None and exit_.error_file and exit_.error_file.startswith("/"):
        err_path = exit_.error_file
    if err_path:
        got = read_tail(err_path, -1, ERROR_FILE_MAX, owner=_ANYONE)
        if got is not None:
            text = got[1].decode("utf-8", "replace")
            if parse_error_file(text).exception:
                e["error_file"], e["error_file_text"] = err_path, redact_text(text)
                ts = L.error_file_time(text)
                if ts is not None and dated is None:
                    dated = (ts, "its error file")
    found = words is not None or "error_file_text" in e or exit_ is not None or ktext
    if not found and rank not in local_missing:
        return None  # a rank of another node nothing here speaks of: not ours to tell
    if words is not None:
        e.update(log=log, held_by=held, tail=redact_text(tail[-RECORD_TAIL:]))
    if exit_ is not None:
        e["exit"] = {
            "by": exit_.by,
            "code": exit_.code,
            "pid": exit_.pid,
            "words": exit_.words(),
            "host": exit_.host,
        }
    if ktext:
        dated = (ktext[-1][0], "the kernel log")  # the kernel's own time is the best
    elif exit_ is not None and exit_.t is not None and (dated is None or "log" in dated[1]):
        dated = (exit_.t, f"{exit_.by}'s record")
    if dated is not None:
        e["died_at"], e["dated_by"] = round(dated[0], 3), dated[1]
    if not found:
        e["looked_in"] = [p for p, _w, _g in files]
    e["local"] = local
    return e


def _xid_on(target: Any, gpu: int, since: float | None) -> tuple[int, float, str] | None:
    """(pid, time, line) of a program's Xid on `gpu` whose pid is no longer a live rank: the
    kernel names the pid of the rank that took it."""
    alive = {p.pid for p in target.ranks}
    best = None
    for ev in getattr(target, "xids", ()) or ():
        if ev.gpu != gpu or ev.pid is None or ev.pid in alive or ev.xid not in PROGRAM_XIDS:
            continue
        if since is not None and ev.t < since:
            continue
        if best is None or ev.t > best[1]:
            pci = ev.pci or "0000:00:00"
            best = (ev.pid, ev.t, ev.text or f"NVRM: Xid (PCI:{pci}): {ev.xid}, pid={ev.pid}")
    return best
