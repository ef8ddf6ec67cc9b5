"""The debug-server evidence gatherer: every rank's stack and flight recorder, from rank 0.

`gather_debugserver(...)` runs in the Watcher's gathering thread once per stall transition
(gputui.watch.gatherers registers it as the `debugserver` kind). It finds the job's debug server
(gputui.collect.nccl.debugserver_find), confirms it by its index page and asks its pages
(gputui.collect.nccl.debugserver_ask), and returns one typed record `{"type": "debugserver",
...}` (gputui.collect.nccl.debugserver_record; see `ranks_of_record` for the rank entries)
that `gputui record` keeps and gputui.diagnose.nccl.debugserver explains, live or in a
replay. Where no server answers, the newest periodic dump of a directory the job names
(or `--debug-dump-dir`) stands in, with the time it was written.

Why the limits: the answer is another program's output, maybe from another node: each
request has a deadline and a byte cap, a dump a byte cap, the JSON a depth cap, and every
string kept is clipped and redacted.

Nothing here raises: a failure is the record's `outcome` and `error`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gputui.collect.frames import clip
from gputui.collect.nccl import debugserver_find as find
from gputui.collect.nccl import debugserver_parse as parse
from gputui.collect.nccl.debugserver_ask import Fetch, ask, confirm, why_failed
from gputui.collect.nccl.debugserver_files import job_uid, newest_dumps, open_dump
from gputui.collect.nccl.debugserver_parse import KIND, OUTCOMES, ranks_of_record
from gputui.collect.nccl.debugserver_record import new_record, ranks_part
from gputui.collect.this_host import is_this_host
from gputui.redact import redact_text

MAX_DUMP_BYTES = 16 << 20


# ---------------------------------------------------------------- dumps


def read_dump(
    directory: str,
    key: str,
    trigger: str,
    local: Mapping[int, int],
    t: float,
    owner: int | None = None,
) -> dict[str, Any] | None:
    """A record from the newest stacks dump in `directory` in which some rank answered (the
    front end outlives its ranks, and its dumps after they ended hold only errors), or None
    when there is no dump. `owner`: the job's uid, when the job named the directory; a
    dump must then be that user's own regular file (never a link to root's files).

    Args:
        directory: the directory the debug server writes its dumps into.
        key: the job's key, written into the record as `job`.
        trigger: what started the reading, written into the record.
        local: pid -> rank of the job's ranks on this node.
        t: the record's time (Unix seconds).
        owner: the job's uid when the job named the directory; None: the caller's own.

    Returns:
        A `debugserver` record from the newest dump a rank answered in, or None when there is no
        dump.
    """
    dumps = newest_dumps(directory)
    if not dumps:
        return None
    first: dict[str, Any] | None = None
    for skipped, (path, mtime) in enumerate(dumps):
        rec = _read_one(directory, path, mtime, key, trigger, local, t, owner)
        first = first or rec
        if any(e.get("outcome") == "done" for e in rec["ranks"]):
            if skipped:
                rec["error"] = (
                    f"the {skipped} newer dump(s) hold no rank's stack (the ranks had ended)"
                )
            return rec
    return first


def _read_one(
    directory: str,
    path: Path,
    mtime: float,
    key: str,
    trigger: str,
    local: Mapping[int, int],
    t: float,
    owner: int | None = None,
) -> dict[str, Any]:
    dump = {
        "dir": clip(redact_text(directory), 1024),
        "file": clip(path.name, 200),
        "written": round(mtime, 3),
    }

    def failed(why: str) -> dict[str, Any]:
        return new_record(key, trigger, "dump", t, outcome="failed", dump=dump, error=why)

    try:
        with os.fdopen(open_dump(path, owner), "rb") as f:
            raw = f.read(MAX_DUMP_BYTES + 1)
    except OSError as e:
        return failed(why_failed(e)[1])
    if len(raw) > MAX_DUMP_BYTES:
        return failed(f"{path.name} is larger than {MAX_DUMP_BYTES >> 20} MiB")
    stacks = parse.dump_sections(raw.decode("utf-8", "replace"))
    if not stacks:
        return failed(f"{path.name} holds no rank section")
    ranks = ranks_part(stacks, {}, local)
    return new_record(key, trigger, "dump", t, dump=dump, ranks=ranks, world=len(stacks))


# ---------------------------------------------------------------- the gatherer


__all__ = ["KIND", "OUTCOMES", "gather_debugserver", "ranks_of_record"]


def gather_debugserver(
    key: str,
    trigger: str,
    ranks: Sequence[Any],
    cancel: threading.Event,
    *,
    server: str | None = None,
    dump_dir: str | None = None,
    environ: Callable[[int], Mapping[str, str]] | None = None,
) -> dict[str, Any] | None:
    """The record for one stalled job (`ranks`: its live local ProcessInfos), or None when
    the job shows no sign of a debug server and none was named.

    Args:
        key: the job's key, written into the record as `job`.
        trigger: what started the gathering (`stalled`, `hung`), written into the record.
        ranks: the job's live local ProcessInfos.
        cancel: set to stop early (the Watcher cancels a gathering that is no longer wanted).
        server: `HOST:PORT` of the debug server when the person named one; None: found from the job.
        dump_dir: a directory of the server's stacks dumps to read instead of asking it.
        environ: pid -> that process's environment (tests pass one; default /proc).

    Returns:
        A `debugserver` record (a JSON-able dict), or None when the job shows no debug server.
    """
    t = time.time()
    fetch = Fetch(cancel)
    local = {p.rank.rank: p.pid for p in ranks if p.rank is not None and p.rank.rank is not None}
    candidates: list[find.Candidate] = []
    if server is not None:
        try:
            host, port = find.parse_addr(server)
            candidates.append(find.Candidate(host, port, "option"))
        except ValueError as e:
            return new_record(key, trigger, "server", t, outcome="failed", error=str(e))
    rank0 = next((p for p in ranks if p.rank is not None and p.rank.rank == 0), None)
    if rank0 is not None:
        candidates += find.front_end_candidates(rank0.pid)
    elif ranks and (m := find.master_candidate(ranks[0].rank.master if ranks[0].rank else None)):
        if not is_this_host(m.host):
            candidates.append(m)
    tried: list[str] = []
    for c in candidates:
        if cancel.is_set():
            return None
        ok, why = confirm(c, fetch)
        if not ok:
            tried.append(f"{c.addr} ({c.found_by}): {why}")
            continue
        outcome, error, entries, world = ask(c, fetch, local)
        rec = new_record(
            key,
            trigger,
            "server",
            t,
            outcome=outcome,
            error=error,
            server=c.addr,
            found_by=c.found_by,
            ranks=entries,
            world=world,
        )
        rec["elapsed_s"] = round(time.time() - t, 3)
        if outcome == "done" or not _dump_dirs(ranks, dump_dir, environ):
            return rec
        tried.append(f"{c.addr}: {error}")
        break
    owner = None if dump_dir is not None else job_uid(ranks)  # the job named it: its user's
    for d in _dump_dirs(ranks, dump_dir, environ):
        rec2 = read_dump(d, key, trigger, local, t, owner)
        if rec2 is not None:
            if tried:
                rec2["error"] = rec2.get("error") or clip("; ".join(tried), 600)
            return rec2
    if server is None and dump_dir is None and not any("option" in s for s in tried):
        return _quiet(key, trigger, t, tried, candidates)
    where = "; ".join(tried) or (f"no stacks_*.txt in {dump_dir}" if dump_dir else "nothing found")
    return new_record(
        key, trigger, "server", t, outcome="absent", error=clip(redact_text(where), 600)
    )


def _quiet(
    key: str, trigger: str, t: float, tried: list[str], cands: list[find.Candidate]
) -> dict[str, Any] | None:
    """Nothing was named: a job without a debug server is the usual case, said by nothing,
    and so is a child of rank 0 that listens for something else (a dashboard, a data
    server). Only rank 0's child on the debug server's port that would not answer is."""
    found = [c for c in cands if c.port == find.DEFAULT_PORT and "child of rank 0" in c.found_by]
    if not found or not tried:
        return None
    return new_record(
        key, trigger, "server", t, outcome="failed", error=clip("; ".join(tried), 600)
    )


def _dump_dirs(
    ranks: Sequence[Any], option: str | None, environ: Callable[[int], Mapping[str, str]] | None
) -> list[str]:
    if option is not None:
        return [option]
    envs = []
    for p in ranks[:64]:
        try:
            envs.append(environ(p.pid) if environ is not None else _environ(p.pid))
        except (OSError, ValueError):
            continue
    return find.dump_dirs(envs, [p.cmdline for p in ranks[:64]])


def _environ(pid: int) -> Mapping[str, str]:
    import psutil

    try:
        return psutil.Process(pid).environ()
    except psutil.Error as e:
        raise OSError(str(e)) from None
