"""The Watcher's record store (gputui/watch/records.py): bounded, and picky about what it keeps.

Records come from gatherer threads and from recordings (which may be hostile), so a record
without a job, a kind the Watcher explains or a numeric time is never kept; only the newest
few per (job, kind) are; the newest one of an episode is found by the job's key or, when
the job's key changed, by a pid it names; and records too old for any episode go.
"""

from __future__ import annotations

from gputui.watch.records import KEEP_PER_JOB, MAX_QUEUED, RecordStore

KINDS = {"stacks", "ras"}


def rec(t: float, kind: str = "stacks", job: object = "j", pids: tuple[int, ...] = ()) -> dict:
    return {"type": kind, "job": job, "t": t, "ranks": [{"pid": p} for p in pids]}


def test_only_records_of_a_known_kind_with_a_job_and_a_time_are_kept():
    s = RecordStore()
    for bad in (rec(1, kind="mystery"), rec(1, job=None), rec(1, job=7), {**rec(1), "t": "1"},
                {**rec(1), "t": True}):  # fmt: skip
        s.keep(bad, KINDS)
    assert s.count("j", "stacks") == 0
    s.keep(rec(1), KINDS)
    assert s.count("j", "stacks") == 1


def test_only_the_newest_few_per_job_and_kind_are_kept_and_the_newest_is_found():
    s = RecordStore()
    for t in range(10, 0, -1):  # out of order, as threads may deliver them
        s.keep(rec(t), KINDS)
    assert s.count("j", "stacks") == KEEP_PER_JOB
    ((kind, newest),) = s.newest(KINDS, "j", set(), start=0.0)
    assert kind == "stacks" and newest["t"] == 10
    assert s.newest(KINDS, "j", set(), start=11.0) == []  # from before this episode


def test_a_job_whose_key_changed_is_found_by_a_pid_its_record_names():
    s = RecordStore()
    s.keep(rec(5, job="old-key", pids=(41, 42)), KINDS)
    assert s.newest(KINDS, "new-key", {99}, start=0.0) == []
    ((_, found),) = s.newest(KINDS, "new-key", {42}, start=0.0)
    assert found["job"] == "old-key"


def test_pruning_drops_what_no_episode_can_use_and_queued_records_come_out_once_in_order():
    s = RecordStore()
    s.keep(rec(1), KINDS)
    s.keep(rec(100, kind="ras"), KINDS)
    s.prune(horizon=50.0)
    assert s.count("j", "stacks") == 0 and s.count("j", "ras") == 1
    s.queue(rec(3))
    s.queue(rec(2))
    assert [r["t"] for r in s.take()] == [2, 3]
    assert s.take() == []


def test_held_gives_every_record_once_oldest_first_for_a_bundles_trace():
    """A bundle writes these into its trace: kept ones and queued ones (a rendezvous record
    is only queued), each once though a gathered record is both."""
    s = RecordStore()
    gathered, waiting = rec(5), {"type": "rendezvous", "t": 2.0, "job": "j"}
    s.keep(gathered, KINDS)
    s.queue(gathered)
    s.queue(waiting)
    s.keep(rec(9, kind="ras"), KINDS)
    assert [r["t"] for r in s.held()] == [2.0, 5, 9]


def test_the_queue_no_one_takes_stays_bounded():
    """The dashboard never takes the queue (only `gputui record` does): a node watched for
    weeks keeps the newest MAX_QUEUED records, not all of them."""
    s = RecordStore()
    for t in range(MAX_QUEUED + 10):
        s.queue(rec(t))
    taken = s.take()
    assert len(taken) == MAX_QUEUED and taken[0]["t"] == 10
