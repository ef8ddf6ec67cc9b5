"""The Watcher's rules, with gatherers that count their calls (no processes needed).

Covers: evidence is gathered exactly once per transition (ok -> stalled, stalled -> hung,
per job; cleared and stalled again is a new transition), never per sample; --no-auto-dump
skips the stacks gatherer only; replay gathers nothing and reads records from the
snapshots, using a record taken shortly before the stall but not one from an earlier
episode; records are handed to `record` once; a gatherer that raises, or never returns
before close(), does not break the verdicts.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from synth import DT, timeline

from gputui.diagnose.evidence import Evidence
from gputui.diagnose.hang.culprit import explain_stacks
from gputui.watch.watcher import JobTarget, Watcher

SPIN, IDLE, COMPUTE = "spin", "idle", "compute"


class Counting:
    """A gatherer that records every target it was called with, and returns a record."""

    def __init__(self, kind: str = "stacks") -> None:
        self.kind = kind
        self.calls: list[JobTarget] = []
        self.lock = threading.Lock()

    def __call__(self, target: JobTarget, cancel: threading.Event) -> dict:
        with self.lock:
            self.calls.append(target)
        return {"type": self.kind, "t": target.verdict.t, "job": target.key, "ranks": []}


def explain_count(record: dict, verdict, snap) -> Evidence:
    return Evidence(record["type"], findings=(f"{record['type']} at {record['t']:.2f}",))


def feed(w: Watcher, snaps) -> list:
    out = []
    for s in snaps:
        out.append(w.update(s))
        assert w.wait(10)  # gatherers here return at once; waiting keeps the test ordered
    return out


def test_one_gather_per_transition_over_many_samples():
    g = Counting()
    w = Watcher(2.0, 5.0, gatherers=[("stacks", g, explain_count)])
    snaps = list(
        timeline(
            (1, [COMPUTE, COMPUTE]),
            (8, [SPIN, IDLE]),  # stalled after 2 s, hung after 5 s, still hung
            (1, [COMPUTE, COMPUTE]),  # cleared
            (4, [SPIN, IDLE]),  # stalled again: a new transition
        )
    )
    verdicts = feed(w, snaps)
    states = [v.state for v in verdicts]
    assert states.count("stalled") > 10 and states.count("hung") > 10  # many samples each
    assert [c.trigger for c in g.calls] == ["stalled", "hung", "stalled"]
    assert w.transitions == 3
    assert [c.key for c in g.calls] == ["master:h:29500"] * 3
    w.close()


def test_the_target_holds_the_jobs_ranks_and_the_verdict_that_triggered():
    g = Counting()
    w = Watcher(1.0, 60.0, gatherers=[("stacks", g, explain_count)])
    feed(w, timeline((2, [SPIN, IDLE, SPIN]), local=True))
    (t,) = g.calls
    assert t.trigger == "stalled" and t.verdict.suspects == (1,)
    # synth's processes are from a recording (live=False): nothing to attach to
    assert t.ranks == ()


def test_a_stall_that_goes_straight_to_hung_is_one_transition():
    g = Counting()
    w = Watcher(2.0, 2.0, gatherers=[("stacks", g, explain_count)])
    feed(w, timeline((5, [SPIN, IDLE])))
    assert [c.trigger for c in g.calls] == ["hung"]


def test_the_evidence_is_folded_into_every_verdict_of_the_episode_and_gone_after():
    g = Counting()
    w = Watcher(1.0, 60.0, gatherers=[("stacks", g, explain_count)])
    verdicts = feed(w, timeline((3, [SPIN, IDLE]), (1, [COMPUTE, COMPUTE])))
    alarmed = [v for v in verdicts if v.alarm]
    assert alarmed and all(len(v.findings) == 1 for v in alarmed)
    assert all(v.findings == () for v in verdicts if not v.alarm)


def test_no_auto_dump_skips_the_stacks_gatherer_only():
    stacks, nccl = Counting("stacks"), Counting("nccl")
    gs = [("stacks", stacks, explain_count), ("nccl", nccl, explain_count)]
    w = Watcher(1.0, 60.0, auto_dump=False, gatherers=gs)
    feed(w, timeline((3, [SPIN, IDLE])))
    assert stacks.calls == [] and len(nccl.calls) == 1


def test_replay_gathers_nothing_and_uses_a_record_taken_just_before_the_stall():
    g = Counting()
    snaps = list(timeline((1, [COMPUTE, COMPUTE]), (6, [SPIN, IDLE])))
    # A dump taken 1.5 s before the detector's transition, as in the H200 demo.
    onset = next(s.t for s in snaps if s.gpus[0].util == 100.0)
    taken = onset + 2.0 - 1.5
    i = next(i for i, s in enumerate(snaps) if s.t >= taken)
    rec = {"type": "stacks", "t": taken, "job": "master:h:29500", "ranks": []}
    snaps[i] = replace(snaps[i], records=(rec,))
    w = Watcher(2.0, 60.0, gatherers=[("stacks", g, explain_count)], live=False)
    verdicts = feed(w, snaps)
    assert g.calls == []
    first = next(v for v in verdicts if v.alarm)
    assert first.findings == (f"stacks at {taken:.2f}",)


def test_a_record_from_an_earlier_episode_is_not_shown_for_a_new_one():
    snaps = list(timeline((3, [SPIN, IDLE]), (30, [COMPUTE, COMPUTE]), (4, [SPIN, IDLE])))
    old = {"type": "stacks", "t": snaps[0].t + 2.5, "job": "master:h:29500", "ranks": []}
    snaps[10] = replace(snaps[10], records=(old,))  # t0 + 2.5 s, still spinning
    w = Watcher(2.0, 60.0, gatherers=[("stacks", Counting(), explain_count)], live=False)
    verdicts = feed(w, snaps)
    second_start = 3 / DT + 30 / DT
    firsts = [v for v in verdicts[: int(second_start)] if v.alarm]
    seconds = [v for v in verdicts[int(second_start) :] if v.alarm]
    assert firsts[-1].findings == (f"stacks at {old['t']:.2f}",)
    assert seconds and all(v.findings == () for v in seconds)


def test_gathered_records_are_taken_once_and_the_callback_hears_of_them():
    g = Counting()
    heard = threading.Event()
    w = Watcher(1.0, 60.0, gatherers=[("stacks", g, explain_count)])
    w.on_evidence = heard.set
    feed(w, timeline((3, [SPIN, IDLE])))
    assert heard.is_set()
    recs = w.take_records()
    assert [(r["type"], r["job"], r["trigger"]) for r in recs] == [
        ("stacks", "master:h:29500", "stalled")
    ]
    assert w.take_records() == []


def test_a_gatherer_that_raises_costs_its_evidence_not_the_verdict():
    def broken(target, cancel):
        raise RuntimeError("gatherer bug")

    w = Watcher(1.0, 60.0, gatherers=[("stacks", broken, explain_stacks)])
    verdicts = feed(w, timeline((3, [SPIN, IDLE])))
    assert verdicts[-1].state == "stalled" and verdicts[-1].findings == ()
    assert [r["type"] for r in w.take_records()] == ["error"]


def test_update_never_waits_for_a_slow_gatherer_and_close_cancels_it():
    started, cancelled = threading.Event(), threading.Event()

    def slow(target, cancel):
        started.set()
        if cancel.wait(30):
            cancelled.set()
        return None

    w = Watcher(1.0, 60.0, gatherers=[("stacks", slow, explain_count)])
    for s in timeline((3, [SPIN, IDLE])):
        w.update(s)  # the gatherer blocks; update() does not
    assert started.wait(10) and w.pending()
    w.close()
    assert cancelled.is_set() and not w.pending()
