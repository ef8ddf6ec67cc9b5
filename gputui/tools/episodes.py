"""Per-job episodes worked on by one background thread, for the pollers that run while a job
spins (NCCL RAS every few seconds, the progress of the rank the others wait for).

Both keep one episode per job key while its GPUs spin, hand at most one piece of work at a
time to a single worker thread (never one per sample: a slow answer is not queued behind
another), and drop the episodes of jobs that stopped spinning. This is that part, once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

E = TypeVar("E")


class EpisodeWorker(Generic[E]):
    """Episodes by job key, and one worker thread named `name` for their work."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._episodes: dict[str, E] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future[None] | None = None
        self._lock = threading.Lock()

    def _submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Start `fn(*args)` on the worker thread (nothing when it was shut down meanwhile)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
        try:
            self._future = self._pool.submit(fn, *args)
        except RuntimeError:  # shut down meanwhile
            pass

    def end(self, keep: set[str]) -> None:
        """Episodes of jobs that no longer spin are over: a new spin starts afresh."""
        with self._lock:
            for key in [k for k in self._episodes if k not in keep]:
                del self._episodes[key]

    def pending(self) -> bool:
        return self._future is not None and not self._future.done()

    def future(self) -> Future[None] | None:
        return self._future

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
