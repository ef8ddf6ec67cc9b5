"""A slow job on the exporter: each GPU's wait ratio and the straggler series, from the real
4 x H200 straggler recording replayed through the exporter's Watch."""

from __future__ import annotations

from pathlib import Path

from test_exporter_metrics import by_name, samples, watch_of

from gputui.collect.trace.format import read_trace
from gputui.exporter.metrics import exported_names

STRAGGLER = Path(__file__).parent / "data" / "h200x4-straggler-4x.jsonl.gz"


def test_the_recorded_straggler_is_exported_with_every_gpus_wait_ratio():
    snaps = read_trace(STRAGGLER)
    # the last sample at which all four ranks are still there (the job then ends)
    end = max(i for i, s in enumerate(snaps) if all(g.pids for g in s.gpus))
    ss = samples(watch_of(snaps[: end + 1]))
    ratio = {s.labels["gpu"]: s.value for s in by_name(ss, "gputui_rank_wait_ratio")}
    assert ratio["0"] == 0.0 and min(ratio["1"], ratio["2"], ratio["3"]) >= 0.95
    (straggler,) = by_name(ss, "gputui_job_straggler")
    assert straggler.labels["gpu"] == "0" and straggler.labels["pid"] == "925"
    assert straggler.labels["host"] == "node7" and straggler.value == 1.0


def test_before_enough_history_no_wait_ratio_and_no_straggler_is_exported():
    ss = samples(watch_of(read_trace(STRAGGLER)[:40]))  # the job's first seconds
    assert by_name(ss, "gputui_rank_wait_ratio") == []
    assert by_name(ss, "gputui_job_straggler") == []


def test_the_demo_hang_exports_no_straggler(demo_snaps):
    assert by_name(samples(watch_of(demo_snaps)), "gputui_job_straggler") == []


def test_both_new_names_are_listed_for_the_dashboard_and_rules_tests():
    assert {"gputui_rank_wait_ratio", "gputui_job_straggler"} <= set(exported_names())
