"""The probe's runner for real: a torch worker, pairs forked into their own process groups,
gloo on CPU processes as simulated devices, injected faults, timeouts and cancel."""

from __future__ import annotations

import threading
import time

import psutil
import pytest

from gputui.probe.analysis import report_json
from gputui.probe.runner import ProbeConfig, Progress, run_probe, torch_installed

pytestmark = pytest.mark.skipif(not torch_installed(), reason="torch is not installed")


def leftover_workers() -> list[psutil.Process]:
    """Probe worker processes still alive under this test process (zombies excepted)."""
    out = []
    for c in psutil.Process().children(recursive=True):
        try:
            if c.status() != psutil.STATUS_ZOMBIE and "gputui.probe.worker" in " ".join(
                c.cmdline()
            ):
                out.append(c)
        except psutil.Error:
            pass
    return out


def failed(report) -> dict[tuple[int, int], str]:
    return {p.pair: p.reason for p in report.failures}


def test_four_simulated_devices_pass_every_pair_with_checked_figures():
    progress: list[Progress] = []
    report = run_probe(ProbeConfig([0, 1, 2, 3], "gloo", timeout=30), on_progress=progress.append)
    assert report.ok, failed(report)
    assert len(report.pairs) == 6 and {p.round for p in report.pairs} == {0, 1, 2}
    data = report_json(report)
    assert len(data["copy"]) == 12  # every ordered pair
    assert all(c["ok"] and c["gbps"] > 0 and c["bytes"] == 8 * 2**20 for c in data["copy"])
    assert all(a["ok"] and a["busbw_gbps"] > 0 and a["latency_us"] > 0 for a in data["allreduce"])
    assert data["ok"] is True and data["failures"] == []
    assert progress[-1].done == progress[-1].total == 6
    assert leftover_workers() == []


def test_a_hung_pair_costs_one_timeout_and_is_killed_with_its_process_group(monkeypatch):
    monkeypatch.setenv("GPUTUI_PROBE_FAULT", "hang:1-2")
    t0 = time.monotonic()
    # 10 s per pair: healthy gloo pairs need a few seconds on a busy 2-core CI box, and a
    # healthy pair that timed out there would fail this test for the wrong reason.
    report = run_probe(ProbeConfig([0, 1, 2, 3], "gloo", timeout=10))
    wall = time.monotonic() - t0
    assert list(failed(report)) == [(1, 2)]
    assert "timed out after 10 s" in failed(report)[(1, 2)]
    hung = report.pair(1, 2)
    assert hung is not None and hung.elapsed_s is not None and hung.elapsed_s < 10 + 2
    # One timeout in all, not one per round: the run is its 3 rounds back to back, each as long
    # as its slowest pair (the hung pair's round ~10 s), plus the start of torch's fork
    # server. Healthy pairs are slower on a busy machine (the suite runs in parallel), so the
    # bound is built from this run's own rounds rather than from a fixed figure.
    rounds: dict[int, float] = {}
    for p in report.pairs:
        rounds[p.round] = max(rounds.get(p.round, 0.0), p.elapsed_s or 0.0)
    assert len(rounds) == 3 and max(rounds.values()) < 10 + 2, rounds
    assert wall < sum(rounds.values()) + 10, f"the whole run took {wall:.1f} s: {rounds}"
    assert leftover_workers() == []


def test_corrupt_data_fails_only_that_pair_and_a_crash_reports_its_stderr(monkeypatch):
    monkeypatch.setenv("GPUTUI_PROBE_FAULT", "corrupt:0-3,exit:1-2")
    report = run_probe(ProbeConfig([0, 1, 2, 3], "gloo", timeout=30))
    reasons = failed(report)
    assert set(reasons) == {(0, 3), (1, 2)}
    assert reasons[(0, 3)].startswith("data check failed: ")
    assert "copy 0->3: 1 of 8388608 bytes differ" in reasons[(0, 3)]
    assert "all_reduce on rank 1" in reasons[(0, 3)]
    assert reasons[(1, 2)] == "worker exited 3: injected fault: pair 1-2 worker exits with status 3"
    data = report_json(report)
    assert data["ok"] is False
    assert {tuple(f["pair"]) for f in data["failures"]} == {(0, 3), (1, 2)}
    assert [c["ok"] for c in data["copy"] if {c["src"], c["dst"]} == {0, 3}] == [False, False]
    assert leftover_workers() == []


def test_cancel_stops_a_hung_pair_at_once(monkeypatch):
    monkeypatch.setenv("GPUTUI_PROBE_FAULT", "hang:0-1")
    cancel = threading.Event()

    def on_progress(p: Progress) -> None:
        if (0, 1) in p.running:
            cancel.set()  # as a user pressing c while the hung pair runs

    t0 = time.monotonic()
    report = run_probe(
        ProbeConfig([0, 1, 2], "gloo", timeout=60), on_progress=on_progress, cancel=cancel
    )
    assert time.monotonic() - t0 < 20
    assert report.cancelled and not report.ok
    reasons = failed(report)
    assert reasons[(0, 1)] == "cancelled"
    assert all(r in ("cancelled", "not run: cancelled") for r in reasons.values())
    assert report.pair(1, 2).ok, "the round before the cancel had finished normally"
    assert leftover_workers() == []
