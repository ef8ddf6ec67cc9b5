"""The bundle's `lastwords/`: each rank's log tail and the kernel's lines about processes.

A person reading a bundle later has no /proc and no dmesg of that moment: the tail of each
rank's log (where it writes, read the same bounded way as the tracker does), including the
log of a rank that is gone when the verdict names its file, and the kernel log's lines about
processes (OOM killer, segfaults, Xids). Redacted like everything else, and sanitized: a
bundle is read with `cat`, so escape codes in a log must not reach a terminal from it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from gputui.collect.model import ProcessInfo
from gputui.collect.procs.rankio import TAIL_MAX, read_tail, refresh_tail, resolve
from gputui.diagnose.kernel_events import parse_kernel
from gputui.redact import redact_text
from gputui.textsafe import clean_lines

MAX_FILES = 256
KERNEL_KEEP = 500


def _safe(data: bytes) -> str:
    text = data[-TAIL_MAX:].decode("utf-8", "replace").replace("\x00", "")
    return clean_lines(redact_text(text))


def bundle_files(
    processes: Sequence[ProcessInfo | int], verdict: Any | None
) -> Iterator[tuple[str, str]]:
    """(file name, text) pairs for the bundle; never raises for one unreadable rank."""
    n = 0
    for p in processes:
        if n >= MAX_FILES:
            break
        if isinstance(p, int) or not p.live:
            continue
        rank = p.rank.rank if p.rank is not None else None
        io = refresh_tail(resolve(p.pid, p.create_time, rank, None))
        head = [
            f"# pid {p.pid}" + (f", rank {rank}" if rank is not None else ""),
            f"# stdout: {io.stdout.words()}",
            f"# stderr: {io.stderr.words()}",
            f"# cwd: {io.cwd}  RLIMIT_CORE: {io.core_limit}",
        ]
        if io.error:
            head.append(f"# {io.error}")
        body = _safe(io.tail) if io.tail else "(no log file to read: see stdout/stderr above)"
        yield f"lastwords/pid-{p.pid}.txt", clean_lines("\n".join(head)) + "\n" + body
        n += 1
    evidence = getattr(verdict, "evidence", None) or {}
    for e in (evidence.get("lastwords") or {}).get("ranks") or ():
        if not isinstance(e, dict) or not e.get("gone") or not isinstance(e.get("log"), str):
            continue
        got = read_tail(e["log"], owner=(None, ()))  # never a link, nor a root-only file
        if got is not None and n < MAX_FILES:
            gone = f"# gone: pid {e.get('pid')}, rank {e.get('rank')}; log {e['log']}"
            yield f"lastwords/gone-pid-{e.get('pid')}.txt", clean_lines(gone) + "\n" + _safe(got[1])
            n += 1
    yield "lastwords/kernel.txt", kernel_text()


def kernel_text() -> str:
    """The kernel log's lines about processes (or why it could not be read)."""
    from gputui.collect.kernlog import KernelLog

    log = KernelLog()
    try:
        lines = log.poll()
    finally:
        log.close()
    if log.error:
        return f"# {log.error}"
    keep = [ln for ln in lines if parse_kernel(ln.text) is not None or "NVRM" in ln.text]
    out = [f"{ln.t:.3f} {ln.text}" for ln in keep[-KERNEL_KEEP:]]
    return clean_lines(redact_text("\n".join(out))) if out else "# no lines about processes"
