"""The pure parts of `check --prometheus`: times, chunks, matchers, job names, counters, and
the history detector's GPU sample (tests/test_prom_history.py runs the whole path against a
real Prometheus)."""

from __future__ import annotations

from array import array

import pytest

from gputui.collect.model import GpuSample
from gputui.collect.prom.client import PromError, chunks, parse_matrix
from gputui.collect.prom.names import DCGM, check_match, default_limit, selector
from gputui.collect.prom.timespec import iso, parse_time
from gputui.diagnose.history.counters import increase
from gputui.diagnose.history.jobs import job_name
from gputui.diagnose.history.samples import fast_sample
from gputui.errors import GputuiError

NOW = 1_795_900_000.0


@pytest.mark.parametrize(
    "text, want",
    [
        ("now", NOW),
        ("3h ago", NOW - 3 * 3600),
        ("90m ago", NOW - 5400),
        ("2d ago", NOW - 2 * 86400),
        ("1795881600", 1795881600.0),
        ("2026-11-28T16:00:00Z", 1795881600.0),
        ("2026-11-28T16:00:00", 1795881600.0),  # no zone: UTC
        ("2026-11-28T17:00:00+01:00", 1795881600.0),
    ],
)
def test_times_are_epoch_iso_or_relative(text, want):
    assert parse_time(text, NOW) == pytest.approx(want)


@pytest.mark.parametrize("text", ["yesterday", "3 hours ago", "nan", "inf", "", "1e30", "12"])
def test_a_time_that_is_not_one_is_a_one_line_error(text):
    with pytest.raises(GputuiError, match="--from"):
        parse_time(text, NOW)


def test_iso_is_utc_seconds():
    assert iso(1795881600.25) == "2026-11-28T16:00:00Z"


def test_chunks_stay_under_the_servers_points_limit_and_ask_each_instant_once():
    cut = chunks(0.0, 86400.0, 1.0)
    assert len(cut) == 9
    assert all((b - a) / 1.0 + 1 <= 10_000 for a, b in cut)
    assert all(b2[0] == b1[1] + 1.0 for b1, b2 in zip(cut, cut[1:], strict=False))
    assert cut[0][0] == 0.0 and cut[-1][1] == 86400.0
    assert chunks(0.0, 100.0, 15.0) == [(0.0, 100.0)]


def test_matchers_go_inside_the_braces_and_nothing_else_does():
    assert check_match('namespace="ml", pod=~"train-.*"') == 'namespace="ml",pod=~"train-.*"'
    assert check_match('a="x,y"') == 'a="x,y"'
    for bad in ('namespace="ml"} or vector(1) {', "up", "a=b", ""):
        with pytest.raises(ValueError):
            check_match(bad)


def test_the_node_list_becomes_an_anchored_alternation_escaped_for_promql():
    q = selector("DCGM_FI_DEV_GPU_UTIL", DCGM, 'namespace="ml"', ("gpu-01.lan", "gpu-02"))
    assert q == 'DCGM_FI_DEV_GPU_UTIL{namespace="ml",Hostname=~"gpu\\\\-01\\\\.lan|gpu\\\\-02"}'


@pytest.mark.parametrize(
    "pod, job",
    [
        ("train-master-0", "train"),
        ("train-worker-13", "train"),
        ("train-launcher", "train"),
        ("llama-pretrain-2", "llama-pretrain"),
        ("sweep-7-x7k2q", "sweep"),
        ("infer", "infer"),
        ("gpt-workers-0-3", "gpt"),
    ],
)
def test_a_pods_job_is_its_name_without_the_replica_part(pod, job):
    assert job_name(pod) == job


def test_a_counter_counts_only_what_it_added_and_a_drop_is_a_reset():
    nan = float("nan")
    inc = increase(array("d", [4, 4, nan, 0, 0, 2, 3]))
    assert inc.added == 3 and inc.resets == (3,) and inc.first_k == 5
    assert increase(array("d", [7, 7, 7])).added == 0


def test_the_model_power_limits_fall_back_by_name():
    assert default_limit("NVIDIA H200") == 700.0
    assert default_limit("NVIDIA H100 PCIe") == 350.0
    assert default_limit("NVIDIA A100-SXM4-80GB") == 400.0
    assert default_limit("Tesla T4") is None


def test_the_fast_sample_equals_the_constructed_one():
    values = {"index": 3, "util": 100.0, "mem_util": 0.0, "power_w": 123.0}
    values |= {"power_limit_w": 700.0, "mem_used_mb": None, "pids": (1,)}
    fast = fast_sample(values)
    assert fast == GpuSample(**values)
    assert fast.power_frac == pytest.approx(123 / 700)
    assert fast.na == {} and fast.na is not fast_sample(values).na


def test_an_answer_not_shaped_as_a_matrix_is_a_prom_error():
    for body in (
        b"<html>",
        b"[]",
        b'{"status": "error", "error": "boom"}',
        b'{"status": "success", "data": {"resultType": "vector", "result": []}}',
        b'{"status": "success", "data": {"resultType": "matrix", "result": [1]}}',
    ):
        with pytest.raises(PromError):
            parse_matrix(body, "http://x")
    ok = parse_matrix(
        b'{"status":"success","data":{"resultType":"matrix","result":'
        b'[{"metric":{"gpu":"0"},"values":[[1,"5"],[2,"NaN"]]}]}}',
        "http://x",
    )
    assert ok[0].labels == {"gpu": "0"} and ok[0].times == [1.0, 2.0]
    assert ok[0].values[0] == 5.0 and ok[0].values[1] != ok[0].values[1]


def test_columns_take_the_exported_pod_labels_and_drop_values_older_than_a_scrape():
    from gputui.collect.prom.client import Series
    from gputui.collect.prom.columns import SEEN, build
    from gputui.collect.prom.names import DCGM

    labels = {
        "Hostname": "n1",
        "gpu": "0",
        "UUID": "GPU-1",
        "exported_pod": "train-worker-1",
        "exported_namespace": "ml",
        "pod": "dcgm-exporter-x7k2q",  # the exporter's own pod, from the scrape config
        "namespace": "gpu-operator",
    }
    grid = [100.0 + 15 * k for k in range(8)]
    # Scraped every 15 s until t=160.2; Prometheus repeats that value for 5 minutes.
    seen = [min(t, 145.0) + 0.2 for t in grid]
    hist = build(
        DCGM,
        {
            "util": [Series(labels, grid, [100.0] * 8)],
            SEEN: [Series(labels, grid, seen)],
        },
        start=100.0,
        step=15.0,
        n=8,
    )
    (g,) = hist.gpus
    owner = hist.owners[g.owner[0]]
    assert (owner.pod, owner.namespace) == ("train-worker-1", "ml")
    util = list(g.cols["util"])
    assert util[:4] == [100.0] * 4  # the value at 145.2 read at 145 and 160 (15 s late)
    assert all(x != x for x in util[5:])  # from 30 s late on: missing, not repeated
    assert g.owner[5:] == [-1, -1, -1]
