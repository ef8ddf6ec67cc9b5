"""The pairwise probe as a screen: progress while it runs, then the N x N matrix.

The probe runs in a thread worker (it takes seconds to minutes); progress comes back from the
runner's thread through `app.call_from_thread`, and the matrix fills in pair by pair. Cells
are colored against the best pair of the run (>= 80% green, 50-80% yellow, below or failed
red) and carry the topology label (NV18, PCIe path) where NVML knows it, so a slow NVLink pair
stands out from a PCIe pair that is merely PCIe-slow. c or escape cancels a run (the runner
kills the pair process groups); q or escape closes the screen once it is done. The results are
saved as JSON and the path is shown.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Footer

from gputui.probe.analysis import best_copy, grade, worst
from gputui.probe.result import PairResult, ProbeReport
from gputui.probe.runner import ProbeConfig, Progress, run_probe, torch_installed
from gputui.ui.keys import screen_bindings
from gputui.ui.screens.run import RunScreen
from gputui.ui.widgets.palette import role
from gputui.ui.widgets.safe_text import Static, Text

STYLES = {"good": "@good", "fair": "@mid", "bad": "@alert", "pending": "dim"}


def default_save_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gputui" / "probes"


def matrix_table(report: ProbeReport) -> Table:
    """Copy GB/s per ordered pair (row = source), colored by grade, with the link label."""
    prefix = "GPU" if report.backend == "nccl" else "dev"
    best = best_copy(report)
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("src\\dst", justify="left")
    for d in report.devices:
        table.add_column(f"{prefix}{d}", justify="right")
    for a in report.devices:
        cells: list[Text] = []
        for b in report.devices:
            if a == b:
                cells.append(Text("."))
                continue
            p = report.pair(a, b)
            c = p.copy(a, b) if p else None
            link = report.link(a, b)
            label = f" {link.label}" if link and link.label != "N/A" else ""
            if p is None:
                cells.append(Text("..." + label, style=STYLES["pending"]))
            elif c is not None and c.ok and c.gbps is not None:
                g = grade(c.gbps, best, p.ok)
                cells.append(Text(f"{c.gbps:.1f}{label}", style=role(STYLES[g])))
            else:
                cells.append(Text("FAIL" + label, style=role(STYLES["bad"])))
        table.add_row(Text(f"{prefix}{a}", style="bold"), *cells)
    return table


def allreduce_text(report: ProbeReport) -> Text:
    vals = [
        p.allreduce.busbw_gbps
        for p in report.pairs
        if p.ok and p.allreduce and p.allreduce.busbw_gbps
    ]
    best = max(vals) if vals else None
    out = Text("all_reduce, 2 ranks (bus bandwidth, small-message latency):\n")
    for p in report.pairs:
        ar = p.allreduce
        name = f"  {p.pair[0]}-{p.pair[1]}: "
        if p.ok and ar is not None and ar.busbw_gbps is not None:
            lat = f"{ar.latency_us:.0f} us" if ar.latency_us is not None else "N/A"
            out.append(
                name + f"{ar.busbw_gbps:.1f} GB/s, {lat}\n",
                style=role(STYLES[grade(ar.busbw_gbps, best)]),
            )
        else:
            out.append(name + "FAIL\n", style=role(STYLES["bad"]))
    return out


class ProbeScreen(RunScreen):
    """Runs `gputui probe` inside the app; the constructor takes the CLI's options."""

    BINDINGS = screen_bindings("run", "probe")
    DEFAULT_CSS = """
    ProbeScreen #probe-worst { text-style: bold; }
    ProbeScreen #probe-worst.-ok { color: $success; }
    ProbeScreen #probe-worst.-bad { color: $error; }
    """

    def __init__(
        self,
        *,
        gpus: list[int] | None = None,
        backend: str | None = None,
        cpu: int = 4,
        timeout: float = 30.0,
        size: int | None = None,
        save_dir: Path | None = None,
        only: int | None = None,
        blame: Any = None,
        on_record: Callable[[dict[str, Any]], object] | None = None,
        job: str | None = None,
    ) -> None:
        super().__init__()
        self.probe_gpus = gpus
        self.probe_backend = backend  # None: nccl when NVML sees 2+ GPUs, else gloo (`cpu`)
        self.probe_cpu = cpu
        self.probe_timeout = timeout
        self.probe_size = size
        self.save_dir = save_dir
        # B, the blamed GPU (gputui.ui.actions.blamed_key): only its pairs; the result as a finding
        # (gputui.diagnose.health.blamed_probe) shown here and handed to `on_record` (the Watcher).
        self.only = only if only is not None else getattr(blame, "gpu", None)
        self.blame = blame
        self.on_record = on_record
        self.job = job
        self.finding: str | None = None
        self.cancel = threading.Event()
        self.finished = threading.Event()  # set once the run is over (done, failed, cancelled)
        self.report: ProbeReport | None = None
        self.saved_path: Path | None = None
        self.error: str | None = None
        self.progress: Progress | None = None
        self._partial: dict[tuple[int, int], PairResult] = {}
        self._devices: list[int] = []
        self._backend = backend or "gloo"

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("GPU pair probe", id="probe-title", classes="run-title", markup=False)
            yield Static(
                "starting...  (c or escape cancels)",
                id="probe-progress",
                classes="run-stage",
                markup=False,
            )
            with VerticalScroll():
                yield Static("", id="probe-matrix")
                yield Static("", id="probe-allreduce")
                yield Static("", id="probe-failures", markup=False)
                yield Static("", id="probe-worst", markup=False)
                yield Static("", id="probe-blamed", markup=False)
                yield Static("", id="probe-saved", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self._run()

    # ------------------------------------------------------------ worker thread side

    def _config(self) -> ProbeConfig:
        """The run's settings; ValueError (shown in the screen) when they cannot work."""
        backend, n = self.probe_backend, self.probe_cpu
        if backend in (None, "nccl"):
            from gputui.probe.topology import gpu_count

            gpus, why = gpu_count()
            if backend is None:
                backend = "nccl" if gpus >= 2 else "gloo"
            elif gpus == 0:
                raise ValueError(f"no GPUs to probe ({why}); try backend gloo")
            if backend == "nccl":
                n = gpus
        present = list(range(n))
        devices = list(self.probe_gpus) if self.probe_gpus is not None else present
        missing = [d for d in devices if d not in present]
        if missing:
            raise ValueError(
                f"no such device {','.join(map(str, missing))}; present: 0-{len(present) - 1}"
            )
        if len(devices) < 2:
            raise ValueError(f"a probe needs at least 2 devices, got {devices}")
        if self.only is not None and self.only not in devices:
            raise ValueError(f"GPU {self.only} is not among the devices {devices}")
        return ProbeConfig(
            devices, backend, size=self.probe_size, timeout=self.probe_timeout, only=self.only
        )

    @work(thread=True, exclusive=True, exit_on_error=False, group="probe")
    def _run(self) -> None:
        try:
            if not torch_installed():
                raise ValueError("the probe needs torch: pip install 'gputui[probe]'")
            cfg = self._config()
            self._devices, self._backend = cfg.devices, cfg.backend
            self._from_thread(self._show_start, cfg)
            report = run_probe(
                cfg,
                on_progress=lambda p: self._from_thread(self._on_progress, p),
                cancel=self.cancel,
            )
            stamp = time.strftime("%Y%m%d-%H%M%S")
            path = (self.save_dir or default_save_dir()) / f"probe-{stamp}.json"
            try:
                from gputui.probe.analysis import save_report

                self.saved_path = save_report(report, path)
            except OSError as e:
                self.error = f"could not save to {path}: {e.strerror or e}"
            self.report = report
            if self.blame is not None:
                self._join(report)
            self._from_thread(self._show_report, report)
        except Exception as e:  # bad options or a bug: a message in the screen, not a crash
            self.error = f"{e}" if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            self._from_thread(self._show_error, self.error)
        finally:
            self.finished.set()

    def _join(self, report: ProbeReport) -> None:
        """The blamed GPU's result as the verdict's finding, and its record for the Watcher."""
        from gputui.diagnose.health.blamed_probe import probe_findings
        from gputui.probe.blamed import report_record

        rec = report_record(self.blame, report, self.job, time.time())
        self.finding = "; ".join(f.text for f in probe_findings(rec))
        if self.on_record is not None:
            self.on_record(rec)

    # ------------------------------------------------------------ UI thread side

    def _show_start(self, cfg: ProbeConfig) -> None:
        what = "GPUs" if cfg.backend == "nccl" else "simulated devices (gloo, CPU)"
        pairs = f" (the pairs of {cfg.only}, the blamed GPU)" if cfg.only is not None else ""
        self.query_one("#probe-title", Static).update(
            f"GPU pair probe: {what} {','.join(map(str, cfg.devices))}{pairs}, "
            f"{cfg.size_bytes / 2**20:g} MiB, timeout {cfg.timeout:g} s per pair"
        )
        self._render_partial()

    def _on_progress(self, p: Progress) -> None:
        self.progress = p
        if p.last is not None:
            self._partial[p.last.pair] = p.last
        running = ", ".join(f"{a}-{b}" for a, b in p.running) or "-"
        self.query_one("#probe-progress", Static).update(
            f"pairs {p.done}/{p.total} done, round {p.round + 1}/{p.rounds}, running: "
            f"{running}  (c or escape cancels)"
        )
        self._render_partial()

    def _render_partial(self) -> None:
        rep = ProbeReport(
            self._devices, self._backend, 0, self.probe_timeout, pairs=list(self._partial.values())
        )
        self.query_one("#probe-matrix", Static).update(matrix_table(rep))

    def _show_report(self, report: ProbeReport) -> None:
        status = (
            "cancelled"
            if report.cancelled
            else "all pairs passed"
            if report.ok
            else (f"{len(report.failures)} of {len(report.pairs)} pairs FAILED")
        )
        self.query_one("#probe-progress", Static).update(
            f"done in {report.wall_s:.1f} s: {status}  (q or escape closes)"
        )
        self.query_one("#probe-matrix", Static).update(matrix_table(report))
        self.query_one("#probe-allreduce", Static).update(allreduce_text(report))
        fails = [f"  {p.pair[0]}-{p.pair[1]}: {p.reason}" for p in report.failures]
        self.query_one("#probe-failures", Static).update(
            "\nFailed pairs:\n" + "\n".join(fails) if fails else ""
        )
        w = self.query_one("#probe-worst", Static)
        w.update("\n" + worst(report).text)
        w.set_class(report.ok, "-ok")
        w.set_class(not report.ok, "-bad")
        if self.finding is not None:
            self.query_one("#probe-blamed", Static).update(f"\njoins the verdict: {self.finding}")
        saved = f"\nsaved to {self.saved_path}" if self.saved_path else f"\n{self.error or ''}"
        self.query_one("#probe-saved", Static).update(saved)

    def _show_error(self, message: str) -> None:
        self.query_one("#probe-progress", Static).update(
            f"probe did not run: {message}  (q or escape closes)"
        )

    def run_finished(self) -> bool:
        return self.finished.is_set()

    def stop_run(self) -> None:
        self.cancel.set()  # the runner kills the pairs' process groups
