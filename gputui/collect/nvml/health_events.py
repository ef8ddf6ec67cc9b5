"""NVML's Xid events: one thread waiting on one event set for every GPU.

Why a thread of its own, not the NVML thread (nvml_thread.py): `nvmlEventSetWait` blocks
until an event or its timeout, and the NVML thread must stay free for the samples. The wait
is at most WAIT_MS, so `close()` ends the thread within about that; creating the set and
registering the GPUs are quick calls and run in the NVML thread with its deadline.

Where events cannot be had (a vGPU, MIG, a driver without them: NotSupported or
FunctionNotFound), `note` says so once and nothing else changes: Xids then come from the
kernel log alone. ECC events are not reported one by one: they make the counters be read
again at once (`ecc_seen`), and the counters tell the rest.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import deque
from typing import Any

from gputui.collect.nvml.thread import NvmlHung, NvmlThread, nvml_thread
from gputui.collect.nvml.xid import XidEvent

WAIT_MS = 500  # longest single wait: the thread notices `close()` within this
MAX_PENDING = 1000  # events kept until taken (a storm of Xids stays bounded)
XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
ECC_EVENTS = 0x1 | 0x2 | 0x200  # single-bit, double-bit, single-bit storm
MAX_ERRORS = 20  # a wait that keeps failing (not timing out) stops the thread


def _addr(handle: Any) -> int | None:
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):
        return None


class XidEvents:
    """Registers every readable GPU for Xid (and ECC) events and collects them.

    `take()` returns the events since the last call; `note` is why there are none to be had
    (None while events work); `ecc_seen` is set when an ECC event came.
    """

    def __init__(
        self,
        nv: Any,
        handles: dict[int, Any],
        *,
        thread: NvmlThread | None = None,
        timeout: float = 10.0,
    ) -> None:
        self._nv = nv
        self._handles = handles
        self._by_addr = {_addr(h): i for i, h in handles.items()}
        self._nvml = thread or nvml_thread()
        self._timeout = timeout
        self._set: Any = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pending: deque[XidEvent] = deque(maxlen=MAX_PENDING)
        self._thread: threading.Thread | None = None
        self.note: str | None = None
        self.registered: tuple[int, ...] = ()
        self.ecc_seen = threading.Event()
        self.waits = 0  # completed waits (for tests and the cost benchmark)

    def start(self) -> None:
        """Create the set and register the GPUs (bounded); start waiting when any is."""
        if not self._handles:
            return
        try:
            self._set, self.registered, self.note = self._nvml.run(
                self._register, timeout=self._timeout, what="nvmlEventSetCreate"
            )
        except NvmlHung as e:
            self.note = f"Xid events: {e}"
            return
        except Exception as e:  # a plain failure of the unit: no events, said once
            self.note = f"Xid events from NVML: n/a ({e})"
            return
        if self._set is None or not self.registered:
            return
        self._thread = threading.Thread(target=self._loop, name="gputui-xid", daemon=True)
        self._thread.start()

    def _register(self) -> tuple[Any, tuple[int, ...], str | None]:
        """In the NVML thread: the set, the GPUs registered, and why not where none is."""
        nv = self._nv
        try:
            es = nv.nvmlEventSetCreate()
        except nv.NVMLError as e:
            return None, (), f"Xid events from NVML: n/a ({_why(e)}); the kernel log still has them"
        done, why = [], None
        for i, h in sorted(self._handles.items()):
            self._nvml.current = ("nvmlDeviceRegisterEvents", i)
            try:
                supported = int(nv.nvmlDeviceGetSupportedEventTypes(h))
                want = supported & (XID_CRITICAL | ECC_EVENTS)
                if not want & XID_CRITICAL:
                    why = why or "this GPU does not report Xid events"
                    continue
                nv.nvmlDeviceRegisterEvents(h, want, es)
                done.append(i)
            except nv.NVMLError as e:
                why = why or _why(e)
        if not done:
            try:
                nv.nvmlEventSetFree(es)
            except nv.NVMLError:
                pass
            return None, (), f"Xid events from NVML: n/a ({why or 'no GPU'})"
        return es, tuple(done), None

    def _loop(self) -> None:
        nv, errors = self._nv, 0
        while not self._stop.is_set():
            try:
                data = nv.nvmlEventSetWait_v2(self._set, WAIT_MS)
            except nv.NVMLError_Timeout:
                self.waits += 1
                continue
            except nv.NVMLError as e:
                errors += 1
                if errors >= MAX_ERRORS:
                    self.note = f"Xid events stopped: {_why(e)}"
                    break
                self._stop.wait(WAIT_MS / 1000)
                continue
            self.waits += 1
            self._handle(int(data.eventType), int(data.eventData), _addr(data.device))
        try:
            nv.nvmlEventSetFree(self._set)
        except Exception:  # noqa: S110 - the process is leaving or NVML is gone
            pass

    def _handle(self, kind: int, value: int, addr: int | None) -> None:
        gpu = self._by_addr.get(addr)
        if kind & XID_CRITICAL:
            ev = XidEvent(time.time(), int(value), "nvml", gpu=gpu)
            with self._lock:
                self._pending.append(ev)
        if kind & ECC_EVENTS:
            self.ecc_seen.set()

    def take(self) -> list[XidEvent]:
        with self._lock:
            out = list(self._pending)
            self._pending.clear()
        return out

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        """Stop waiting; the thread ends within one wait (WAIT_MS) and frees the set."""
        self._stop.set()
        th = self._thread
        if th is not None:
            th.join(WAIT_MS / 1000 + 0.5)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


def _why(e: BaseException) -> str:
    return (str(e) or type(e).__name__).removeprefix("NVMLError_")
