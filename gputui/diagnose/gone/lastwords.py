"""A rank's last words: what its log tail, its error file and the kernel log say about why it
stopped (or why it errs while still alive).

Why these sources and in this order: the rank's own words are the most specific (a Python
exception names the error and the line), then what the kernel did to it (the OOM killer, a
segfault, an Xid on its GPU), then what NCCL said (a watchdog timeout names the collective a
*waiting* rank was stuck in, not the cause). The lines were taken from real deaths on an H100
(tests/data/lastwords/ holds them).

Pure: text in, `Words` out. Callers pass untrusted text bounded already; everything kept here
is cut to a sentence and sanitized by the face that shows it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gputui.collect.frames import Frame
from gputui.diagnose.kernel_events import KernelEvent

MAX_SENTENCE = 400  # an exception message can be a paragraph: its first line is kept
HEADLINE = 160  # in a headline, its first sentence

_RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:\s?")
_FILE_LINE = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
# `RuntimeError: ...`, `torch.OutOfMemoryError: ...`, `KeyboardInterrupt`; a hint line such as
# "CUDA kernel errors might be ..." has spaces before any colon, so it is not taken.
_EXC = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
_CUDA = re.compile(
    r"(CUDA error: [^\n.]+|CUDA out of memory|illegal memory access|device-side assert"
    r" triggered|an illegal instruction was encountered|unspecified launch failure)",
    re.IGNORECASE,
)
_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout: (WorkNCCL\(SeqNum=\d+, OpType=\w+)"
    r"(?:.*?\) ran for (\d+) milliseconds)?"
)
_ASYNC = re.compile(
    r"(WorkNCCL\(SeqNum=\d+, OpType=\w+).*?\) raised the following async exception: ([^,\n]+)"
)
_NCCL_WARN = re.compile(r"NCCL WARN (.+)$")


@dataclass(frozen=True)
class Words:
    """What one rank's log says, most telling first."""

    exception: str | None = None  # `RuntimeError: Expected to have finished ...`
    frame: str | None = None  # the innermost user frame it names: `ddp.py:13`
    cuda: str | None = None  # a CUDA error line, when no exception carries it
    nccl: str | None = None  # the NCCL watchdog / async error / WARN line, shortened
    kernel: tuple[KernelEvent, ...] = field(default=())

    @property
    def found(self) -> bool:
        return bool(self.exception or self.cuda or self.nccl or self.kernel)

    def cause(self) -> str | None:
        """One phrase: the exception (with its line), else the kernel's act, else CUDA/NCCL."""
        xid = next((k for k in self.kernel if k.how == "xid"), None)
        extra = f" (Xid {xid.xid})" if xid is not None else ""
        if self.exception:
            where = f" ({self.frame})" if self.frame else ""
            return f"{_said(first_sentence(self.exception))}{where}{extra}"
        for how in ("oom-kill", "segfault", "trap"):
            k = next((k for k in self.kernel if k.how == how), None)
            if k is not None:
                return k.sentence()
        if self.cuda:
            return self.cuda + extra
        if xid is not None:
            return xid.sentence()
        return self.nccl

    def to_json(self) -> dict[str, Any]:
        return {
            "exception": self.exception,
            "frame": self.frame,
            "cuda": self.cuda,
            "nccl": self.nccl,
            "kernel": [k.text for k in self.kernel],
            "cause": self.cause(),
        }


def _short(text: str, limit: int = MAX_SENTENCE) -> str:
    """One line of at most `limit` characters, whitespace runs folded."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _said(exc: str) -> str:
    """An exception line as a person says it: a CUDA error by its message alone (the class,
    torch.AcceleratorError or RuntimeError, adds nothing), others without the module path."""
    name, sep, msg = exc.partition(": ")
    if sep and msg.startswith(("CUDA error", "CUDA out of memory")):
        return msg.removesuffix(" was encountered")  # fits an 80-column banner with its line
    return name.rsplit(".", 1)[-1] + sep + msg


def first_sentence(text: str, limit: int = HEADLINE) -> str:
    """`CUDA out of memory. Tried to allocate ...` -> its first sentence (from 60 chars on),
    so a headline stays one line; the whole message is in `check --json`."""
    cut = text.find(". ", 60)
    if 0 < cut < limit:
        return text[: cut + 1]
    return _short(text, limit)


def rank_lines(text: str, rank: int | None) -> list[str]:
    """The lines of `text` this rank wrote: torch prefixes them `[rankN]:`; a file with
    several ranks' lines (one log per node) keeps this rank's and the unprefixed ones."""
    out = []
    for ln in text.splitlines():
        m = _RANK_PREFIX.match(ln)
        if m is not None:
            if rank is not None and int(m.group(1)) != rank:
                continue
            ln = ln[m.end() :]
        out.append(ln)
    return out


def _is_user(path: str) -> bool:
    from gputui.diagnose.hang.stack_reading import is_library

    return not path.startswith("<") and not is_library(Frame("f", path, 1))


def parse_traceback(lines: list[str]) -> tuple[str | None, str | None]:
    """(exception line, innermost user frame `file.py:N`) of the LAST traceback in `lines`.

    The exception line is the first unindented line after the frames; lines after it (the
    message's continuation, CUDA's hints) are not part of it. Chained tracebacks ("During
    handling of the above exception") end in the last one, which is the one that killed it.
    """
    start = None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last)"):
            start = i
            break
    if start is None:
        return None, None
    frames: list[tuple[str, int]] = []
    exc = None
    for ln in lines[start + 1 :]:
        m = _FILE_LINE.match(ln)
        if m is not None:
            frames.append((m["file"], int(m["line"])))
            continue
        if not ln.strip() or ln[:1].isspace():
            continue  # the source line, carets, or a blank
        e = _EXC.match(ln.strip())
        if e is not None:
            exc = e["name"] + (f": {e['msg']}" if e["msg"] else "")
        else:  # an exception with a message that does not look like a name (rare)
            exc = ln.strip()
        break
    if exc is None:
        return None, None  # truncated mid-traceback: say nothing rather than guess
    user = [f for f in frames if _is_user(f[0])]
    pick = user[-1] if user else (frames[-1] if frames else None)
    frame = None
    if pick is not None:
        frame = f"{pick[0].rsplit('/', 1)[-1]}:{pick[1]}"
    return _short(exc), frame


def parse_log(text: str, rank: int | None = None) -> Words:
    """Last words from a log tail (already bounded by the reader).

    Args:
        text: the end of a rank's stderr or log file.
        rank: the rank that wrote it, when known (a shared log names each rank's lines).

    Returns:
        Its Words: the last exception, the user frame it names, CUDA and NCCL lines.
    """
    lines = rank_lines(text, rank)
    exc, frame = parse_traceback(lines)
    cuda = nccl = None
    for ln in reversed(lines):
        if cuda is None and (m := _CUDA.search(ln)):
            cuda = _short(m.group(1) if m.group(1).startswith("CUDA error") else ln.strip())
        if nccl is None:
            if m := _WATCHDOG.search(ln):
                ran = f" ran for {m.group(2)} ms" if m.group(2) else ""
                nccl = f"NCCL watchdog: collective timed out: {m.group(1)}){ran}"
            elif m := _ASYNC.search(ln):
                nccl = f"NCCL: {m.group(1)}) failed: {_short(m.group(2))}"
            elif m := _NCCL_WARN.search(ln):
                nccl = "NCCL WARN " + _short(m.group(1))
        if cuda is not None and nccl is not None:
            break
    if exc and cuda and cuda.split(": ", 1)[-1] in exc:
        cuda = None  # the exception already says it
    return Words(exception=exc, frame=frame, cuda=cuda, nccl=nccl)


def parse_error_file(text: str) -> Words:
    """torchelastic's error file (TORCHELASTIC_ERROR_FILE, written by @record):
    `{"message": {"message": "RuntimeError: ...", "extraInfo": {"py_callstack": ...}}}`.

    Args:
        text: the error file's content.

    Returns:
        Its Words (the exception and the user frame of its call stack); empty Words when it is not
        one.
    """
    try:
        doc = json.loads(text)
    except ValueError:
        return Words()
    msg = doc.get("message") if isinstance(doc, dict) else None
    stack = None
    if isinstance(msg, dict):
        extra = msg.get("extraInfo")
        stack = extra.get("py_callstack") if isinstance(extra, dict) else None
        msg = msg.get("message")
    if not isinstance(msg, str) or not msg.strip():
        return Words()
    frame = None
    if isinstance(stack, str):
        frame = parse_traceback(stack.splitlines())[1]
    first = msg.strip().splitlines()[0]
    return Words(exception=_short(first), frame=frame)
