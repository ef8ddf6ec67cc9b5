"""The probe's pure parts: which pairs run together, fault parsing, grading and naming the
worst GPU or link. No processes, no torch."""

from __future__ import annotations

import itertools

import pytest

from gputui.probe.analysis import grade, report_text, worst
from gputui.probe.faults import parse_faults
from gputui.probe.result import CopyResult, PairResult, ProbeReport
from gputui.probe.schedule import all_pairs, round_robin


@pytest.mark.parametrize("n", range(2, 10))
def test_every_pair_runs_exactly_once_and_pairs_in_a_round_are_disjoint(n):
    devices = list(range(n))
    rounds = round_robin(devices)
    flat = [frozenset(p) for r in rounds for p in r]
    assert sorted(map(sorted, flat)) == sorted(map(sorted, itertools.combinations(devices, 2)))
    assert len(set(flat)) == len(flat)
    for r in rounds:
        used = [d for p in r for d in p]
        assert len(used) == len(set(used)), f"a GPU is in two pairs of one round: {r}"


@pytest.mark.parametrize("n", range(2, 10))
def test_even_n_needs_n_minus_1_rounds_odd_n_needs_n(n):
    assert len(round_robin(list(range(n)))) == (n - 1 if n % 2 == 0 else n)


def test_any_device_indices_work_and_keep_their_order_within_a_pair():
    rounds = round_robin([3, 5, 7])
    assert all(a < b for r in rounds for a, b in r)
    assert {p for r in rounds for p in r} == set(all_pairs([3, 5, 7]))
    assert round_robin([0]) == []


def test_fault_spec_parses_pairs_in_either_order():
    f = parse_faults("hang:1-2, corrupt:3-0")
    assert f == {frozenset({1, 2}): {"hang"}, frozenset({0, 3}): {"corrupt"}}


@pytest.mark.parametrize("bad", ["hang", "hang:1", "melt:0-1", "hang:a-b", "hang:1-1"])
def test_a_malformed_fault_spec_is_an_error_not_ignored(bad):
    with pytest.raises(ValueError):
        parse_faults(bad)


def test_grade_compares_with_the_best_pair():
    assert grade(400, 400) == "good"
    assert grade(320, 400) == "good"  # 80%
    assert grade(300, 400) == "fair"
    assert grade(150, 400) == "bad"
    assert grade(400, 400, ok=False) == "bad"
    assert grade(None, 400) == "bad"


def _report(n: int, failed: dict[tuple[int, int], str], slow: tuple[int, int] | None = None):
    pairs = []
    for a, b in all_pairs(list(range(n))):
        gbps = 100.0 if (a, b) == slow else 390.0
        if (a, b) in failed:
            pairs.append(PairResult((a, b), reason=failed[(a, b)]))
        else:
            copies = [CopyResult(a, b, gbps, 1, True), CopyResult(b, a, gbps, 1, True)]
            pairs.append(PairResult((a, b), ok=True, copies=copies))
    return ProbeReport(list(range(n)), "nccl", 1, 30, pairs=pairs)


def test_a_gpu_whose_every_pair_fails_is_named_the_broken_gpu():
    w = worst(_report(4, {(0, 2): "x", (1, 2): "x", (2, 3): "timed out after 30 s"}))
    assert (w.kind, w.gpu) == ("gpu", 2)
    assert "GPU 2 is the broken GPU" in w.text


def test_otherwise_the_failed_link_is_named():
    w = worst(_report(4, {(1, 3): "data check failed: copy 1->3"}))
    assert (w.kind, w.pair) == ("link", (1, 3))


def test_when_all_pass_the_slowest_link_is_named_with_its_share_of_the_best():
    rep = _report(3, {}, slow=(0, 2))
    w = worst(rep)
    assert w.pair == (0, 2) and "26% of the best" in w.text
    text = report_text(rep)
    assert "GPU0" in text and "100.0" in text and "slowest link 0-2" in text
