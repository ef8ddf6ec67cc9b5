"""Reading what PyTorch's debug server says: its pages, its dump files, its per-rank text.

`torch.distributed.debug.start_debug_server()` (torch 2.10 and later) runs a worker HTTP
server in every rank and, on rank 0, a front end (port 25999 by default) that fetches every
rank's answer and renders one HTML page: per rank an `<h2>Rank N: URL</h2>` (the worker's
URL names the rank's host), then `<pre>` with the rank's text, or a "Failed to fetch"
paragraph. Its periodic dumps (`dump_dir`) hold the same answers as text files,
`stacks_YYYYmmdd_HHMMSS.txt` with `=== Rank N: URL ===` sections. The same layout has held
from the first version (a Flask app) to torch 2.13 (http.server), so gputui reads these
pages rather than the server's private worker API.

Everything here is pure and bounded: the text is untrusted remote output (another node's
paths, another process's error messages), so each piece is capped, only the few fields
gputui needs are kept, and nothing is evaluated. The record this produces is checked again
by `ranks_of_record` when it comes back from a recording.

A rank's stack text is Python's faulthandler format, innermost frame first:

    Thread 0x00007f11d5807b80 (most recent call first):
      File "/train.py", line 14 in main
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gputui.collect.frames import MAX_FRAMES, MAX_TEXT, Frame, clip

KIND = "debugserver"  # the record's type
OUTCOMES = ("done", "absent", "refused", "timeout", "failed")
MAX_RANKS = 4096  # a page's sections read; the largest jobs have tens of thousands of ranks
MAX_RECORD_RANKS = 512  # rank entries kept in a record (the odd ones first, see keep_ranks)
MAX_THREADS = 64  # threads read per rank
MAX_PGS = 8  # process groups kept per rank (the default group and a few subgroups)
MAX_JSON_DEPTH = 12  # a flight-recorder answer nests 5 deep; deeper is not one
MAX_JSON_CHARS = 4 << 20  # one rank's flight-recorder JSON

_SECTION = re.compile(
    r"<h2>\s*Rank\s+(\d{1,7})\s*:\s*([^<]{0,600})</h2>(.*?)(?=<h2>\s*Rank\s+\d|</section>|\Z)",
    re.S,
)
_PRE = re.compile(r"<pre>(.*?)</pre>", re.S)
_FAILED = re.compile(r"Failed to fetch:\s*status=(\d{1,4})")
_DUMP_SECTION = re.compile(r"^=== Rank (\d{1,7}): (.{0,600}?) ===$", re.M)
_THREAD = re.compile(
    r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[([^\]]{0,100})\])?"
    r" \(most recent call first\):",
)
_FILE = re.compile(r'^\s+File "(.*)", line (\d+|\?+) in (.*)$')


@dataclass(frozen=True)
class RankAnswer:
    """One rank's section of a page or a dump: its worker's URL and its text, or why not."""

    rank: int
    url: str
    text: str | None  # None: the front end could not fetch this rank
    status: int | None = None  # the worker's HTTP status where it failed

    @property
    def host(self) -> str | None:
        return host_of(self.url)


def host_of(url: str) -> str | None:
    """`http://node-b:41625/handler/dump_traceback?` -> `node-b` (None when not a URL)."""
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    return clip(host, 253) if host else None


def page_sections(page: str) -> list[RankAnswer]:
    """The per-rank sections of a front-end page (`/stacks`, `/fr_trace_json`...)."""
    out: list[RankAnswer] = []
    for m in _SECTION.finditer(page):
        if len(out) >= MAX_RANKS:
            break
        rank, url, body = int(m.group(1)), html.unescape(m.group(2)).strip(), m.group(3)
        failed = _FAILED.search(body)
        pre = _PRE.search(body)
        text = html.unescape(pre.group(1)) if pre is not None else None
        if failed is not None:
            out.append(RankAnswer(rank, url, None, int(failed.group(1))))
        else:
            out.append(RankAnswer(rank, url, text))
    return out


def dump_sections(text: str) -> list[RankAnswer]:
    """The per-rank sections of a periodic dump file (`stacks_*.txt`)."""
    marks = list(_DUMP_SECTION.finditer(text))[:MAX_RANKS]
    out = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[m.end() : end].strip("\n")
        err = re.fullmatch(r"Error: (\d{1,4})", body.strip())
        if err is not None:
            out.append(RankAnswer(int(m.group(1)), m.group(2), None, int(err.group(1))))
        else:
            out.append(RankAnswer(int(m.group(1)), m.group(2), body))
    return out


# ---------------------------------------------------------------- stacks


@dataclass(frozen=True)
class Thread:
    tid: str
    current: bool  # the thread that answered (the worker server's), never the training loop
    name: str | None
    frames: tuple[Frame, ...]  # innermost first


def threads(text: str) -> list[Thread]:
    """The threads of one faulthandler dump."""
    out: list[Thread] = []
    head: re.Match[str] | None = None
    frames: list[Frame] = []

    def close() -> None:
        if head is not None and len(out) < MAX_THREADS:
            out.append(
                Thread(
                    head.group(2), head.group(1) == "Current thread", head.group(3), tuple(frames)
                )
            )

    for line in text.splitlines()[: MAX_THREADS * (MAX_FRAMES + 110)]:
        m = _THREAD.match(line)
        if m is not None:
            close()
            head, frames = m, []
            continue
        f = _FILE.match(line)
        if f is not None and head is not None and len(frames) < MAX_FRAMES:
            num = int(f.group(2)) if f.group(2).isdigit() and len(f.group(2)) < 8 else None
            name = clip(f.group(3).strip(), MAX_TEXT)
            frames.append(Frame(name, clip(short_file(f.group(1)), MAX_TEXT), num))
    close()
    return out


_PACKAGES = re.compile(r"/(?:site|dist)-packages/")
_STDLIB_DIR = re.compile(r"/lib/python3\.\d+/")


def short_file(path: str) -> str:
    """A frame's file as py-spy shows it, so the two sources name the same line: an installed
    package's path from its package (`torch/distributed/distributed_c10d.py`), the standard
    library's from its module, anything else by its name (`train.py`)."""
    for rx in (_PACKAGES, _STDLIB_DIR):
        parts = rx.split(path)
        if len(parts) > 1 and parts[-1]:
            return parts[-1]
    if path.startswith("<"):
        return path
    return path.rsplit("/", 1)[-1] or path


def main_frames(ts: list[Thread]) -> tuple[Frame, ...]:
    """The training loop's frames: the thread that runs a script's `<module>` (the main
    thread), else the deepest thread that did not answer the request."""
    others = [t for t in ts if not t.current and t.frames]
    scripts = [t for t in others if any(f.function == "<module>" for f in t.frames)]
    pick = scripts or others
    return max(pick, key=lambda t: len(t.frames)).frames if pick else ()


# ---------------------------------------------------------------- the flight recorder


def bounded_json(text: str) -> Any:
    """JSON of at most MAX_JSON_CHARS and MAX_JSON_DEPTH; ValueError otherwise."""
    if len(text) > MAX_JSON_CHARS:
        raise ValueError(f"more than {MAX_JSON_CHARS >> 20} MiB")
    depth = 0
    deepest = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            esc = not esc and ch == "\\"
            if ch == '"' and not esc:
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                raise ValueError(f"nested deeper than {MAX_JSON_DEPTH}")
        elif ch in "]}":
            depth -= 1
    return json.loads(text)


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int) and 0 <= v < 1 << 62:
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit() and len(v) < 20:
        n = int(v)
        return n if n >= 0 else None
    return None


def _op(v: Any) -> str | None:
    """'gloo:all_reduce', 'nccl:all_reduce' -> 'all_reduce'."""
    if not isinstance(v, str) or not v.strip():
        return None
    return clip(v.strip().split(":", 1)[-1], 40)


def fr_groups(dump: Any) -> list[dict[str, Any]]:
    """Per process group, what one rank's flight recorder says: the last collective it
    entered (its sequence number, its op, its state) and the group's counters."""
    if not isinstance(dump, dict):
        return []
    groups: dict[str, dict[str, Any]] = {}
    entries = dump.get("entries")
    for e in entries[-4096:] if isinstance(entries, list) else []:
        if not isinstance(e, dict) or e.get("is_p2p") is True:
            continue
        pg = e.get("process_group")
        pg_id = e.get("pg_id")
        key = str(pg_id) if isinstance(pg_id, (int, str)) else None
        if key is None and isinstance(pg, list) and pg:
            key = str(pg[0])
        seq = _int(e.get("collective_seq_id"))
        if key is None or seq is None:
            continue
        g = groups.setdefault(clip(key, 40), {"pg": clip(key, 40)})
        if seq >= g.get("seq", -1):
            g.update(seq=seq, op=_op(e.get("profiling_name")), state=_state(e.get("state")))
            if isinstance(pg, list) and len(pg) > 1 and isinstance(pg[1], str):
                g["desc"] = clip(pg[1], 60)
    status = dump.get("pg_status")
    for key, st in list(status.items())[:64] if isinstance(status, dict) else []:
        if not isinstance(st, dict):
            continue
        g = groups.setdefault(clip(str(key), 40), {"pg": clip(str(key), 40)})
        for word in ("enqueued", "started", "completed"):
            n = _int(st.get(f"last_{word}_collective"))
            g[word] = n
    return sorted(groups.values(), key=lambda g: (len(g["pg"]), g["pg"]))[:MAX_PGS]


def _state(v: Any) -> str | None:
    return clip(v, 20) if isinstance(v, str) and v else None


def keep_ranks(entries: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """At most MAX_RECORD_RANKS entries: those outside a collective, failed, or behind in
    the flight recorder first (the ones a verdict names), then the rest in rank order."""

    def odd(e: dict[str, Any]) -> bool:
        return e.get("outcome") != "done" or not e.get("collective")

    ordered = sorted(entries, key=lambda e: (not odd(e), e.get("rank", 0)))
    yield from sorted(ordered[:MAX_RECORD_RANKS], key=lambda e: e.get("rank", 0))


# ---------------------------------------------------------------- reading a record back


def ranks_of_record(rec: Any) -> list[dict[str, Any]]:
    """The rank entries of a `debugserver` record, checked (it may come from an untrusted
    recording); ValueError on anything gputui would not have written.

    Args:
        rec: a `debugserver` record, possibly from an untrusted recording.

    Returns:
        Its rank entries, each checked.

    Raises:
        ValueError: an entry gputui would not have written.
    """
    if not isinstance(rec, dict) or rec.get("type") != KIND:
        raise ValueError("not a debugserver record")
    if rec.get("outcome") not in OUTCOMES:
        raise ValueError("unknown outcome")
    ranks = rec.get("ranks")
    if not isinstance(ranks, list) or len(ranks) > MAX_RECORD_RANKS:
        raise ValueError(f"'ranks' must be a list of at most {MAX_RECORD_RANKS} entries")
    out = []
    for e in ranks:
        if not isinstance(e, dict):
            raise ValueError("a rank entry is an object")
        r, pid = e.get("rank"), e.get("pid")
        if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < 1 << 24:
            raise ValueError("a rank entry's rank is an integer in [0, 2**24)")
        if pid is not None and (
            isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 1 << 22
        ):
            raise ValueError("a rank entry's pid is a positive integer or null")
        frames = e.get("frames") or []
        if not isinstance(frames, list) or len(frames) > MAX_FRAMES:
            raise ValueError(f"frames: a list of at most {MAX_FRAMES}")
        for k in ("host", "error", "collective", "outcome"):
            v = e.get(k)
            if v is not None and (not isinstance(v, str) or len(v) > 600):
                raise ValueError(f"a rank entry's {k} is a short string or null")
        fr = e.get("fr") or []
        if (
            not isinstance(fr, list)
            or len(fr) > MAX_PGS
            or not all(isinstance(g, dict) for g in fr)
        ):
            raise ValueError(f"fr: a list of at most {MAX_PGS} objects")
        out.append({**e, "frames": [Frame.from_json(f) for f in frames]})
    return out
