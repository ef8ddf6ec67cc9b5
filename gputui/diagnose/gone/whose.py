"""Whose traceback is it: the rank's, a child's, a thread's, or nobody's in particular.

A live rank's output file is often shared: a multiprocessing spawn child (an uploader, a
DataLoader worker) inherits it, threads write to it, and `srun -o` or a shell redirect gives
every rank the same file. A traceback found there was placed there by whoever wrote it, not
by the rank whose file it is: on CPU, rank 0's spawn child raised, exited, and the headline
said "rank 0 wrote an error and is still alive" over NCCL RAS naming rank 2. What the text
itself says about its writer:

- torch marks a rank's lines `[rankN]:`: marked with this rank's number, it is the rank's;
- a traceback whose frames run through `multiprocessing/process.py` `_bootstrap` was raised
  in a child process (the rank's own never is);
- "Exception in thread ..." or `threading.py` `_bootstrap_inner` frames: one of its threads;
- otherwise, unmarked: it may be the rank's, or any process's that shares the file.

Pure, bounded by the record's tail.
"""

from __future__ import annotations

import re
from typing import Any

from gputui.diagnose.gone.lastwords import Words

_PREFIX = re.compile(r"^\[rank(\d+)\]:\s?")


def _last_traceback(lines: list[str]) -> int | None:
    for i in range(len(lines) - 1, -1, -1):
        if "Traceback (most recent call last)" in lines[i]:
            return i
    return None


def whose_error(tail: Any, rank: Any, w: Words) -> str:
    """ "own", "child", "thread" or "unmarked" for the error `w` found in a live rank's tail."""
    if not isinstance(tail, str) or not w.exception:
        return "own"
    lines = tail[-65536:].splitlines()
    start = _last_traceback(lines)
    block = lines[start:] if start is not None else lines
    text = "\n".join(block[:400])
    if "multiprocessing" in text and "_bootstrap" in text and "_bootstrap_inner" not in text:
        return "child"
    before = lines[start - 1] if start else ""
    if "_bootstrap_inner" in text or before.lstrip("[]rank0123456789: ").startswith(
        "Exception in thread"
    ):
        return "thread"
    marks = {int(m.group(1)) for ln in block[:400] if (m := _PREFIX.match(ln))}
    if isinstance(rank, int) and rank in marks:
        return "own"
    return "unmarked"
