"""The lastwords gatherer: at a stall, each rank's log tail, error file and kernel lines.

Run by the Watcher once per stall transition, off the caller's thread. It reads what the
rank I/O tracker (gputui.collect.procs.rankio) remembered while the ranks were alive, reads each
log file once more (a rank writes its traceback in its last moment), the torchelastic error
file, the kernel log's lines about these pids, and looks for a core file of a rank that
crashed. Everything is bounded (64 KiB per file read, 16 KiB kept) and redacted before it
goes into the record; the record is what `gputui record` writes and a replay explains again.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from gputui.collect.procs.rankio import RECORD_TAIL, RankIO, alive, read_tail
from gputui.redact import redact_text


class JobTarget(Protocol):
    """What the gatherer reads of gputui.watch.watcher.JobTarget (tools sit below the watcher)."""

    @property
    def key(self) -> str: ...

    @property
    def trigger(self) -> str: ...

    @property
    def ranks(self) -> tuple[Any, ...]: ...

    @property
    def gone(self) -> tuple[Any, ...]: ...

    @property
    def xids(self) -> tuple[Any, ...]: ...


KIND = "lastwords"
MAX_KERNEL_LINES = 20  # per rank
ERROR_FILE_MAX = 16 * 1024
ALIVE_TAIL = 4096  # a live rank's tail in the record: only its last lines are read


def _text(data: bytes, limit: int = RECORD_TAIL) -> str:
    text = data[-limit:].decode("utf-8", "replace").replace("\x00", "")
    return redact_text(text)


def _kernel_lines() -> tuple[list[tuple[float, str]], str | None]:
    from gputui.collect.kernlog import KernelLog

    log = KernelLog()
    try:
        lines = [(ln.t, ln.text) for ln in log.poll()]
    finally:
        log.close()
    return lines, log.error


def _entry(
    io: RankIO | None,
    pid: int,
    rank: int | None,
    gone: bool,
    kernel: list[tuple[float, str]],
    pattern: str | None,
) -> dict[str, Any]:
    from gputui.diagnose.kernel_events import kernel_events
    from gputui.tools.attach.core import find_core

    e: dict[str, Any] = {"pid": pid, "rank": rank, "gone": gone, "seen": io is not None}
    if io is None:
        e["kernel"] = [[t, redact_text(x)] for t, x in _about(kernel, pid, None)]
        return e
    e.update(
        create_time=io.create_time,
        stdout=io.stdout.to_json(),
        stderr=io.stderr.to_json(),
        cwd=io.cwd,
        core_limit=io.core_limit,
        log=io.tail_path,
        tail=_text(io.tail, RECORD_TAIL if gone else ALIVE_TAIL),
        error=io.error,
    )
    if gone:
        _other_logs(e, io)
    if io.error_file:
        got = read_tail(io.error_file, -1, ERROR_FILE_MAX, owner=io.owner)
        e["error_file"] = io.error_file
        if got is not None:
            e["error_file_text"] = _text(got[1], ERROR_FILE_MAX)
    about = _about(kernel, pid, io.create_time)
    e["kernel"] = [[t, redact_text(x)] for t, x in about]
    crashed = any(k.how in ("segfault", "trap") for k in kernel_events(about, pid, None))
    if gone and (crashed or io.core_limit not in (None, "0")):
        e["core"] = find_core(pid, io.cwd, pattern, io.create_time)
    return e


def _other_logs(e: dict[str, Any], io: RankIO) -> None:
    """A gone rank whose stderr holds no words: the other files it wrote (stdout's, its own
    log file) are read once, as its user could, and the first with a traceback speaks for
    it; `looked_in` lists every file read, for the honest "no message found"."""
    from gputui.diagnose.gone.lastwords import parse_log

    looked = [p for p in (io.log_path(),) if p]
    w = parse_log(e.get("tail") or "", io.rank)
    for path in io.logs:
        looked.append(path)
        if w.exception or w.cuda:
            continue
        got = read_tail(path, -1, owner=io.owner)
        if got is None:
            continue
        text = _text(got[1], RECORD_TAIL)
        w = parse_log(text, io.rank)
        if w.exception or w.cuda:
            e.update(log=path, tail=text)
    if looked:
        e["looked_in"] = looked


def _about(
    kernel: list[tuple[float, str]], pid: int, born: float | None
) -> list[tuple[float, str]]:
    from gputui.diagnose.kernel_events import kernel_events

    events = kernel_events(kernel, pid, born)
    return [(ev.t, ev.text) for ev in events][-MAX_KERNEL_LINES:]


def gather_lastwords(target: JobTarget, cancel: threading.Event) -> dict[str, Any] | None:
    """One `lastwords` record for the job: every rank the tracker knows, gone or alive.

    Args:
        target: the stalled job at its transition (gputui.watch.gatherers.JobTarget).
        cancel: set to stop early.

    Returns:
        The `lastwords` record, or None when no rank is known.
    """
    tracker = getattr(target, "rankio", None)
    if tracker is None:
        return None
    t = time.time()
    ios: dict[int, RankIO | None] = {io.pid: io for io in tracker.of_job(target.key)}
    ranks: dict[int, int | None] = {pid: io.rank for pid, io in ios.items() if io is not None}
    gpus: dict[int, list[int]] = {}
    for p in target.ranks:
        ios.setdefault(p.pid, tracker.get(p.pid))
        ranks.setdefault(p.pid, p.rank.rank if p.rank else None)
        gpus[p.pid] = list(p.gpus)
    for s in target.gone:
        if s.pid is not None:
            ios.setdefault(s.pid, tracker.get(s.pid))
            ranks.setdefault(s.pid, s.rank)
            if s.gpu is not None:
                gpus.setdefault(s.pid, []).append(s.gpu)
    if not ios:
        return None
    kernel, kernel_error = _kernel_lines()
    pattern = tracker.pattern
    out = []
    for pid in sorted(ios, key=lambda p: (ranks.get(p) is None, ranks.get(p) or 0, p)):
        if cancel.is_set():
            break
        io = ios[pid]
        gone = not alive(pid, io.create_time if io is not None else None)
        if io is not None:
            io = tracker.final(pid) or io
        out.append(_entry(io, pid, ranks.get(pid), gone, kernel, pattern))
        out[-1]["gpus"] = gpus.get(pid, [])
    late_error = None
    if not cancel.is_set():  # ranks gone before they were seen: what survives them
        from gputui.collect.procs.rankio import core_pattern
        from gputui.tools.gather.late_words import late_entries

        try:
            # Gone ranks NVML saw whose outputs were never looked at: what survives them may
            # speak for them (their entry then replaces the one that knows nothing).
            unseen = {
                r: pid
                for pid, io in ios.items()
                if io is None and (r := ranks.get(pid)) is not None
            }
            unseen = {r: p for r, p in unseen.items() if not alive(p, None)}
            late = late_entries(
                target, tracker, kernel, pattern or core_pattern(), set(ios), unseen
            )
            spoken = {
                e["pid"] for e in late if e.get("pid") in unseen.values() and not e.get("looked_in")
            }
            out = [e for e in out if e["pid"] not in spoken] + [
                e for e in late if not (e.get("looked_in") and e.get("pid") in unseen.values())
            ]
        except Exception as e:  # the others' words must not be lost to a surprise here
            late_error = f"{type(e).__name__}: {e}"[:200]
    return {
        "type": KIND,
        "t": round(t, 3),
        "job": target.key,
        "trigger": target.trigger,
        "core_pattern": pattern,
        "kernel_error": kernel_error,
        "late_error": late_error,
        "ranks": out,
    }
