"""Wiring: the Source, one Sampler thread, the detector, the HTTP server; ends on a signal.

Nothing here attaches to a process (no py-spy, no ptrace): the exporter reads NVML and /proc
only, so it runs without CAP_SYS_PTRACE.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import TextIO

from prometheus_client import CollectorRegistry
from prometheus_client.process_collector import ProcessCollector

from gputui.collect.model import Snapshot
from gputui.collect.sampler import Sampler
from gputui.collect.source import Source
from gputui.exporter.metrics import GputuiCollector
from gputui.exporter.server import bound_port, serve_metrics
from gputui.exporter.view import Watch
from gputui.watch.judge import Judge
from gputui.watch.settings import WatchSettings

CLOSE_TIMEOUT_S = 2.0  # closing NVML may block when NVML is wedged: do not wait longer


def _loopback(addr: str) -> bool:
    """Whether `addr` is a loopback address (a name counts only as `localhost`)."""
    import ipaddress

    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return addr == "localhost"


def make_registry(watch: Watch) -> CollectorRegistry:
    """gputui's families and the standard process_* series of the exporter itself (its CPU
    and memory, so a fleet can see that it is not a load); no other default collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GputuiCollector(watch))
    ProcessCollector(registry=registry)
    return registry


class _Log:
    """One line per event on stderr; a failure that repeats is said once, not every tick."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._last_error = ""

    def say(self, text: str) -> None:
        print(f"gputui exporter: {text}", file=self.out, flush=True)

    def error(self, e: BaseException) -> None:
        text = f"sampling failed: {type(e).__name__}: {e}"
        if text != self._last_error:
            self._last_error = text
            self.say(text + " (retrying; the sample age grows until it works)")


def serve(
    source: Source,
    *,
    addr: str,
    port: int,
    host: str,
    settings: WatchSettings | None = None,
    stop: threading.Event | None = None,
    out: TextIO = sys.stderr,
    **loose: float,
) -> int:
    """Serve until SIGTERM/SIGINT (or `stop` is set, for tests). Returns the exit status.

    `settings`: the detector's thresholds and --busy-limit (gputui.watch.settings); the
    loose form (`stall_after=`, `hang_after=`, `busy_limit=`) builds the same, for tests.
    """
    s = WatchSettings.of(settings, **loose)
    log = _Log(out)
    from gputui.exporter.busy import BusySuspects
    from gputui.exporter.debugserver_up import DebugServerUp
    from gputui.exporter.ras_suspects import RasSuspects

    ras = RasSuspects() if source.kind != "replay" else None  # a replay has no job to ask
    busy = BusySuspects(s.busy_limit) if source.kind != "replay" else None  # nor processes
    debug = DebugServerUp() if source.kind != "replay" else None
    # The detector alone: the exporter gathers no evidence (it attaches to no process).
    watch = Watch(Judge(s), host=host, ras=ras, busy=busy, debug=debug)
    server = serve_metrics(addr, port, make_registry(watch))  # fails before sampling starts
    stop = stop or threading.Event()
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:

        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def consume(snap: Snapshot) -> None:
        try:
            watch.on_snapshot(snap)
        except Exception as e:  # a bug on one sample must not end the sampler thread
            log.error(e)

    sampler = Sampler(
        source,
        consume,
        on_end=lambda: log.say("the replay has ended; still serving its last sample"),
        on_error=log.error,
    )
    sampler.start()
    where = f"[{addr}]" if ":" in addr else addr
    log.say(
        f"serving http://{where}:{bound_port(server)}/metrics from {source.description} "
        "(Ctrl-C or SIGTERM to stop)"
    )
    if not _loopback(addr):
        log.say(
            "this address is reachable from other hosts and the exporter has no TLS or "
            "authentication: put a proxy with TLS and basic auth in front (docs/hostile.md)"
        )
    try:
        while not stop.wait(1.0):
            pass
    finally:
        sampler.stop()  # never waits on a sampler blocked inside NVML
        if ras is not None:
            ras.close()
        if debug is not None:
            debug.close()
        server.shutdown()
        server.server_close()
        closer = threading.Thread(target=source.close, name="gputui-close", daemon=True)
        closer.start()
        closer.join(CLOSE_TIMEOUT_S)
    log.say(f"stopped after {watch.samples} samples")
    return 0
