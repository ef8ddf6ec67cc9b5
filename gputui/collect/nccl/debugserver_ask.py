"""Asking PyTorch's debug server over HTTP: confirm its front end, then ask its pages at once.

The front end (found by gputui.collect.nccl.debugserver_find) is confirmed by its index page,
then its `/stacks` and `/fr_trace_json` pages (and `/fr_trace_nccl_json`, NCCL's recorder) are
asked at the same time. Why these pages: the front end fetches every rank's answer itself (all
nodes, not only this one) and the page layout has not changed since the first version. Why
the limits: the answer is another program's output, maybe from another node: each request has
a deadline and a byte cap. The front end waits for each rank's worker up to its own
`fetch_timeout` (60 s by default), so a dead worker can hold the whole page: gputui gives up
at REQUEST_S and says why.

Nothing here raises on a server's failure: it is an outcome and a message.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gputui.collect.frames import MAX_TEXT, clip
from gputui.collect.nccl import debugserver_find as find
from gputui.collect.nccl import debugserver_parse as parse
from gputui.collect.nccl import http_deadline
from gputui.collect.nccl.debugserver_record import fr_by_rank, ranks_part
from gputui.redact import redact_text

CONFIRM_S = 3.0  # the index page: a few KB rendered by the front end itself
REQUEST_S = 20.0  # a page that fetches every rank (the front end's own wait is 60 s per rank)
MAX_PAGE_BYTES = 16 << 20  # 4096 ranks x 4 KB of stack text
MARK = "Torch Distributed Debug Server"  # in the title bar of every page
STACKS, FR, FR_NCCL = "/stacks", "/fr_trace_json", "/fr_trace_nccl_json"


class Fetch:
    """A bounded HTTP GET: (status, text) or an OSError that says why."""

    def __init__(self, cancel: threading.Event | None = None) -> None:
        self.cancel = cancel or threading.Event()

    def __call__(
        self, c: find.Candidate, path: str, limit_s: float, max_bytes: int
    ) -> tuple[int, str]:
        """One deadline over the whole answer (gputui.collect.nccl.http_deadline): a server
        that trickles its status line, headers or chunk-size lines cannot hold gputui."""
        status, body = http_deadline.get(
            c.host, c.port, path, limit_s, max_bytes, connect_s=CONFIRM_S, cancel=self.cancel
        )
        return status, body.decode("utf-8", "replace")


def why_failed(e: BaseException) -> tuple[str, str]:
    """(outcome, message) for a failed request (or a dump that could not be read)."""
    if isinstance(e, (TimeoutError, socket.timeout)):
        return "timeout", str(e) or "timed out"
    if isinstance(e, ConnectionRefusedError):
        return "refused", "connection refused (nothing listens there)"
    return "failed", clip(redact_text(f"{type(e).__name__}: {e}"), MAX_TEXT)


def confirm(c: find.Candidate, fetch: Fetch) -> tuple[bool, str | None]:
    """Whether `c` is a debug server's front end (its index page says so)."""
    try:
        status, text = fetch(c, "/", CONFIRM_S, 1 << 20)
    except OSError as e:
        return False, why_failed(e)[1]
    if status == 200 and MARK in text:
        return True, None
    return False, f"{c.addr} answers, but not as PyTorch's debug server (HTTP {status})"


def ask(
    c: find.Candidate, fetch: Fetch, local: Mapping[int, int]
) -> tuple[str, str | None, list[dict[str, Any]], int]:
    """(outcome, error, rank entries, world) from one confirmed front end: its stacks and
    both flight-recorder pages, asked at once."""
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="gputui-debugserver") as pool:
        futs = {
            p: pool.submit(fetch, c, p, REQUEST_S, MAX_PAGE_BYTES) for p in (STACKS, FR, FR_NCCL)
        }
        pages: dict[str, tuple[int, str] | BaseException] = {}
        for p, f in futs.items():
            try:
                pages[p] = f.result()
            except Exception as e:  # noqa: BLE001 - an OSError from the fetch, or a bug
                pages[p] = e
    got = pages[STACKS]
    if isinstance(got, BaseException):
        outcome, why = why_failed(got)
        if outcome == "timeout":
            why += (
                " (the front end waits for every rank's worker, up to its fetch_timeout, "
                "60 s by default: a rank's worker may be unreachable)"
            )
        return outcome, f"its /stacks page: {why}", [], 0
    status, text = got
    if status != 200:
        return "failed", f"its /stacks page answered HTTP {status}", [], 0
    stacks = parse.page_sections(text)
    fr: dict[int, Any] = {}
    problem = None
    for path in (FR, FR_NCCL):
        page = pages[path]
        if isinstance(page, BaseException) or page[0] != 200:
            continue
        more, bad = fr_by_rank(parse.page_sections(page[1]))
        for r, groups in more.items():
            fr.setdefault(r, groups)
        problem = problem or bad
    if not stacks:
        return "failed", "its /stacks page held no rank", [], 0
    return "done", problem, ranks_part(stacks, fr, local), len(stacks)
