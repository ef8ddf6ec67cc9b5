"""A real Prometheus server process on 127.0.0.1, started and stopped for a test.

Why: the exporter's rules and the history reader are checked against the real server, not
a stand-in; both test kinds need the same start (a free port, retried if taken before the
bind), the same wait on `/-/ready` with a deadline, and the same stop.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path


class PrometheusProc:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def _launch(self, tmp: Path, cfg: Path, args: list[str], within: float) -> None:
        """Starts prometheus with `cfg` (and `args`) in `tmp` and waits until it is ready;
        its log is tmp/prometheus.log, quoted in the AssertionError if it never is."""
        from conftest import free_port

        self.log = tmp / "prometheus.log"
        self.url = ""
        for _ in range(3):  # a free port can be taken between the probe and the bind
            port = free_port()
            self.url = f"http://127.0.0.1:{port}"
            with open(self.log, "w") as log:
                self.proc = subprocess.Popen(
                    [
                        "prometheus",
                        f"--config.file={cfg}",
                        *args,
                        f"--web.listen-address=127.0.0.1:{port}",
                    ],
                    cwd=tmp,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            if self._ready(within):
                return
            self.stop()
        raise AssertionError("prometheus did not start:\n" + self.log.read_text()[-3000:])

    def _ready(self, within: float) -> bool:
        end = time.monotonic() + within
        while time.monotonic() < end and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.2)  # the poll's pace; the bound is `within`
        return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
