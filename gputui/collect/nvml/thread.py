"""The one thread that talks to NVML, so that every NVML call can be abandoned.

An NVML call is a C call, and it can block for good: a GPU fallen off the bus, a wedged
driver. Python cannot interrupt a thread stuck in C, so every call runs in one daemon thread
that owns the library, and the caller waits for it with a deadline. When a call overstays,
the library is *hung* for the rest of the process:

- later calls fail at once with the same message instead of queueing behind the stuck one
  (calls already queued fail too);
- nvmlShutdown is never called (it would only queue behind the stuck call);
- `stuck()` tells `gputui.cli.main` to leave through `os._exit` after flushing its output:
  a normal exit runs the C libraries' destructors, and one that takes the library's lock
  would wait forever on the thread that holds it.

One thread for the samples because NVML itself is process-wide: a hang seen by one reader
means every other use of NVML in the process would hang too. Slow reads that must not hold
the samples up (the NVLink error counters, ~0.8 ms of driver CPU per read: collect/nvml/nvlink.py)
get a *side* thread of their own (`side_thread`), with the same deadline and the same
abandon-on-overstay; `stuck()` counts every side thread too.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gputui.errors import GputuiError

T = TypeVar("T")

HUNG_HINT = "the driver may be hung or a GPU fallen off the bus; try nvidia-smi"


class NvmlHung(GputuiError):
    """An NVML call did not return in time; the library is not used again."""


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass(eq=False)
class _Job:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    what: str
    # Released once the job has an outcome. A held lock rather than an Event: the hand-over
    # then costs about half (one per sample, ~30 us of CPU on the 2-core CPU box).
    done: threading.Lock = field(default_factory=_held_lock)
    finished: bool = False  # guarded by NvmlThread._lock
    result: Any = None
    error: BaseException | None = None


class NvmlThread:
    """Runs callables one at a time in a daemon thread; callers wait with a deadline.

    The callables are whole units of NVML work (open the library and list the GPUs; read
    every GPU once), so one sample costs one hand-over, not one per NVML call. A callable
    names the NVML function it is inside through `current`, so a hang is reported with the
    call that hung ("nvmlDeviceGetUtilizationRates on GPU 0"), not only the unit of work:
    a string, or (function or name, GPU index), formatted only if a call hangs (a read sets
    it a dozen times per GPU, and formatting each time would be most of gputui's own cost).
    """

    def __init__(self, name: str = "gputui-nvml") -> None:
        self._name = name
        self._queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._busy: _Job | None = None
        self.current: Any = ""  # the NVML call in progress, set by the running callable
        self.hung: str | None = None  # the one-line message, once a call has overstayed

    def run(self, fn: Callable[..., T], *args: Any, timeout: float, what: str) -> T:
        """`fn(*args)` in the NVML thread; NvmlHung if it does not return within `timeout`.

        Exceptions raised by `fn` are re-raised here. They should be plain (text, not
        pynvml's NVMLError): turning an NVMLError into text calls nvmlErrorString, which
        belongs in the NVML thread like every other call.
        """
        job = _Job(fn, args, what)
        with self._lock:
            if self.hung is not None:
                raise NvmlHung(self.hung)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._queue.put(job)
        if not job.done.acquire(timeout=timeout):
            with self._lock:
                if not job.finished:
                    self._give_up(timeout, what)
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[no-any-return]

    def _give_up(self, timeout: float, what: str) -> None:
        """Mark the library hung and fail every queued call. Holds self._lock."""
        if self.hung is None:
            where = _describe(self.current) or what
            self.hung = f"NVML did not answer within {timeout:g} s ({where}): {HUNG_HINT}"
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            self._finish(job, None, NvmlHung(self.hung))
        if self._busy is not None:  # its caller stops waiting; the thread stays stuck
            self._finish(self._busy, None, NvmlHung(self.hung))

    @staticmethod
    def _finish(job: _Job, result: Any, error: BaseException | None) -> None:
        """Give the job its outcome, once. Holds self._lock."""
        if job.finished:
            return  # a late answer after a timeout is dropped
        job.result, job.error, job.finished = result, error, True
        job.done.release()

    def end(self) -> None:
        """Let the thread end once the queue is done (a side thread whose reader closed)."""
        with self._lock:
            if self._thread is not None and self.hung is None:
                self._queue.put(_END)

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is _END:
                with self._lock:
                    self._thread = None
                return
            with self._lock:
                if job.finished:  # failed by _give_up while queued
                    continue
                self._busy = job
                self.current = ""
            error: BaseException | None = None
            try:
                result = job.fn(*job.args)
            except BaseException as e:  # handed to the caller
                result, error = None, e
            with self._lock:
                self._busy = None
                self._finish(job, result, error)

    def stuck(self) -> bool:
        """The thread may be inside NVML for good: exit must not wait on it."""
        with self._lock:
            return self.hung is not None or self._busy is not None


def _describe(current: Any) -> str:
    """`current` as words: "nvmlInit", or "nvmlDeviceGetUtilizationRates on GPU 0"."""
    if isinstance(current, tuple) and len(current) == 2:
        fn, gpu = current
        return f"{getattr(fn, '__name__', fn)} on GPU {gpu}"
    return str(current or "")


_THREAD = NvmlThread()
_END = _Job(lambda: None, (), "end")  # queued by end(): the loop returns
_SIDE: weakref.WeakSet[NvmlThread] = weakref.WeakSet()


def nvml_thread() -> NvmlThread:
    """The process's NVML thread."""
    return _THREAD


def side_thread(name: str) -> NvmlThread:
    """A thread of its own into NVML, for slow reads off the samples' path; `stuck()` counts
    it (NVML is thread-safe: the driver serializes what it must)."""
    t = NvmlThread(name)
    _SIDE.add(t)
    return t


def stuck() -> bool:
    """True when a thread may be stuck inside NVML: the process should leave with os._exit."""
    return _THREAD.stuck() or any(t.stuck() for t in list(_SIDE))
