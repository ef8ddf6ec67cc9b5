"""The worker threads that run the Watcher's gatherers off the caller's tick.

Why apart from the Watcher: what a gatherer does (py-spy, RAS, a log read) may take seconds,
and the Watcher's `update()` must never block. So each kind of evidence gets one worker
thread, made at its first use (a slow kind does not hold up another), every run is
cancellable through one Event, and a gatherer that breaks its contract (raises, returns no
record) cannot kill its thread or lose the others' records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from gputui.watch.gatherers import Gather, JobTarget

__all__ = ["Gathering"]


class Gathering:
    """One single-thread pool per evidence kind; each record a run returns goes to
    `on_record` (kept, queued, announced by the Watcher)."""

    def __init__(self, on_record: Callable[[dict[str, Any]], None], cancel: threading.Event):
        self._on_record = on_record
        self.cancel = cancel
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._futures: list[Future[Any]] = []

    def has_pool(self, kind: str) -> bool:
        """A run of this kind was started before (the last-words pool is made at the first
        transition or death: a rank that leaves later is read again only then)."""
        return kind in self._pools

    def submit(self, kind: str, gather: Gather, target: JobTarget) -> None:
        """Run `gather` for `target` in `kind`'s worker (made now if it is the first)."""
        if self.cancel.is_set():
            return
        pool = self._pools.get(kind)
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"gputui-{kind}")
            self._pools[kind] = pool
        self._futures.append(pool.submit(self._run, gather, target))

    def forget_done(self) -> None:
        """Drop the finished runs (the list stays as long as the runs in flight)."""
        self._futures = [f for f in self._futures if not f.done()]

    def _run(self, gather: Gather, target: JobTarget) -> None:
        if self.cancel.is_set():
            return
        try:
            rec = gather(target, self.cancel)
        except Exception as e:  # a gatherer that breaks its contract must not kill the thread
            rec = {"type": "error", "t": time.time(), "job": target.key, "error": repr(e)[:200]}
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            return
        rec.setdefault("job", target.key)
        rec.setdefault("trigger", target.trigger)
        self._on_record(rec)

    def pending(self) -> bool:
        """A run is still going (or queued)."""
        return any(not f.done() for f in self._futures)

    def wait(self, timeout: float, extra: Iterable[Future[Any] | None] = ()) -> None:
        """Wait for every run (and the `extra` futures) to end, at most `timeout` s in all."""
        deadline = time.monotonic() + timeout
        for f in [*self._futures, *(f for f in extra if f is not None)]:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                f.result(timeout=left)
            except Exception:  # noqa: S110 - _run never raises; a timeout is the caller's
                pass

    def shutdown(self) -> None:
        """Cancel the queued runs and let the workers end (the Event stops running tools)."""
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
