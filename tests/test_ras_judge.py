"""What gputui concludes from NCCL RAS and the flight recorder (gputui/diagnose/nccl/ras.py).

The judge compares two answers taken a few seconds apart: a rank behind is only claimed as
stuck when the counts did not move. The explainer reads whole `nccl` records, as a replay
hands them back, and turns RAS being off, too old or silent into one plain sentence.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from synth import snapshot

from gputui.collect.nccl.ras_model import answer_to_dict
from gputui.collect.nccl.ras_parse import parse_answer
from gputui.diagnose.nccl.ras import explain_nccl, judge_ras
from gputui.diagnose.verdict import Verdict

DATA = Path(__file__).parent / "data" / "ras"


def answer(name: str):
    return parse_answer((DATA / name).read_text())


def moved(a, by: int):
    """The same answer with every AllReduce count `by` higher (NCCL still moving)."""
    comms = []
    for c in a.comms:
        ops = {
            op: [(v + by, n) for v, n in d] if op == "AllReduce" else d for op, d in c.ops.items()
        }
        ranks = tuple(
            replace(r, counts={k: v + by if k == "AllReduce" else v for k, v in r.counts.items()})
            for r in c.ranks
        )
        comms.append(replace(c, ops=ops, ranks=ranks))
    return replace(a, comms=tuple(comms))


@pytest.mark.parametrize("form", ["txt", "json"])
def test_a_rank_whose_count_stays_behind_is_named_with_where_it_runs(form):
    a = answer(f"behind-4rank.{form}")
    found, summary = judge_ras(a, a, 3.0, local_pids={908})
    assert found == [
        "NCCL RAS: rank 1 (10.0.0.1, pid 908, GPU 1 on this node) is behind: AllReduce count "
        "812, the other 3 ranks 813, unchanged over 3 s."
    ]
    assert summary["behind"][0] | {} == {
        "rank": 1,
        "host": "10.0.0.1",
        "pid": 908,
        "gpu": 1,
        "op": "AllReduce",
        "count": 812,
        "others": 813,
        "confirmed": True,
    }


def test_counts_that_move_between_queries_are_progress_not_a_culprit():
    a = answer("behind-4rank.json")
    found, summary = judge_ras(a, moved(a, 50), 3.0, set())
    assert len(found) == 1 and "still move (813/812 -> 863/862" in found[0]
    assert summary["behind"] == []


def test_one_answer_alone_says_it_is_not_confirmed():
    a = answer("behind-4rank.json")
    (line,) = judge_ras(None, a, None, set())[0]
    assert "rank 1" in line and "one query only, not yet confirmed" in line


@pytest.mark.parametrize("form", ["txt", "json"])
def test_a_dead_rank_comes_first(form):
    a = answer(f"dead-4rank.{form}")
    found, summary = judge_ras(a, a, 3.0, set())
    assert found[0].startswith("NCCL RAS: rank 3 (10.0.0.2, pid 5151, GPU 1) is dead")
    assert summary["missing"] == [
        {"rank": 3, "host": "10.0.0.2", "pid": 5151, "gpu": 1, "dead": True}
    ]


def test_a_process_that_a_missing_rank_names_is_said_once_and_one_here_is_said_to_be_here():
    """RAS lists a silent process twice (as a communicator's missing rank and among the
    processes it had no data from): said once, as the rank. A listed process of this node
    is said to be on it, so that its address never reads as another host's."""
    from gputui.collect.nccl.ras_model import RasProcess

    a = answer("dead-4rank.json")
    twice = RasProcess(pid=5151, host="10.0.0.2", gpus="1")
    local = RasProcess(pid=77, host="10.0.0.1", gpus="0")
    found, _ = judge_ras(None, replace(a, missing_processes=(twice, local)), None, {77})
    assert not any("process 5151" in f for f in found), found
    assert "NCCL RAS: no answer from process 77 on 10.0.0.1 (GPU 0 on this node)." in found


@pytest.mark.parametrize("form", ["txt", "json"])
def test_an_asynchronous_error_is_said_with_ncclss_words(form):
    a = answer(f"asyncerror-4rank.{form}")
    found = judge_ras(a, a, 3.0, set())[0]
    assert "rank 2 (10.0.0.2, pid 5150, GPU 0) reported an asynchronous error: " in found[0]
    assert "emote process error" in found[0]


@pytest.mark.parametrize("form", ["txt", "json"])
def test_ranks_in_different_collectives_are_a_mismatch_not_a_straggler(form):
    a = answer(f"mismatch-4rank.{form}")
    found, summary = judge_ras(a, a, 3.0, set())
    assert found == [
        "NCCL RAS: ranks entered different collectives: rank 1 (10.0.0.1, pid 908, GPU 1) is "
        "ahead in Broadcast (2 vs 1) and behind in AllReduce (812 vs 813) (a collective-type "
        "mismatch: the ranks took different code paths)."
    ]
    assert summary["mismatch"] is True


def test_many_ranks_behind_are_grouped_in_one_sentence():
    a = answer("docs-32rank.txt")
    (line,) = judge_ras(a, a, 3.0, set())[0]
    assert line == (
        "NCCL RAS: 6 ranks are behind: ranks 0,2-5,7 on 172.16.64.210 at collective count 6649, "
        "the other 26 ranks 6650, unchanged over 3 s."
    )


def test_all_ranks_at_the_same_count_point_away_from_a_straggler():
    a = answer("asyncerror-4rank.json")
    healthy = replace(
        a,
        comms=tuple(
            replace(c, ranks=tuple(replace(r, async_error=0) for r in c.ranks)) for c in a.comms
        ),
    )
    (line,) = judge_ras(healthy, healthy, 4.0, set())[0]
    assert "all 4 ranks launched the same collectives (AllReduce 813), unchanged over 4 s" in line


def test_an_answer_for_another_jobs_processes_is_flagged():
    a = answer("behind-4rank.json")
    found = judge_ras(a, a, 3.0, local_pids={1, 2})[0]
    assert any("another job on this node holds the RAS port" in f for f in found)


# ---------------------------------------------------------------- whole records


def verdict_and_snap():
    snap = snapshot(1000.0, ["spin", "idle"])
    v = Verdict(t=1000.0, state="stalled", spinning=(0,), suspects=(1,), suspect_pids=(1001,))
    return v, snap


def record(ras=None, flightrec=None, **kw):
    return json.loads(
        json.dumps(
            {
                "type": "nccl",
                "t": 1000.0,
                "job": "master:h:29500",
                "trigger": "stalled",
                "ras": ras,
                "flightrec": flightrec,
                **kw,
            }
        )
    )


def q(name: str, t: float) -> dict:
    return {"outcome": "done", "t": t, "latency_s": 0.004, "answer": answer_to_dict(answer(name))}


def test_a_record_with_two_answers_explains_the_rank_behind():
    v, snap = verdict_and_snap()
    ev = explain_nccl(
        record(ras={"queries": [q("behind-4rank.json", 10.0), q("behind-4rank.json", 13.0)]}),
        v,
        snap,
    )
    assert ev.kind == "nccl" and ev.culprit_frame is None
    assert ev.findings[0].endswith(
        "AllReduce count 812, the other 3 ranks 813, unchanged over 3 s."
    )
    assert ev.extra["behind"][0]["rank"] == 1


@pytest.mark.parametrize(
    ("ras", "said"),
    [
        (
            {"env": {"NCCL_RAS_ENABLE": "0"}, "queries": []},
            "NCCL RAS is off (NCCL_RAS_ENABLE=0 in the job's environment).",
        ),
        (
            {
                "nccl": {"loaded": True, "version": "2.21.5"},
                "queries": [{"outcome": "refused", "error": "nothing listens on localhost:28028"}],
            },
            "NCCL 2.21.5 is too old for RAS (needs 2.24).",
        ),
        (
            {
                "nccl": {"loaded": True, "version": "2.28.9"},
                "queries": [
                    {
                        "outcome": "timeout",
                        "error": "localhost:28028 accepted the query but "
                        "answered nothing within 10 s",
                    }
                ],
            },
            "NCCL RAS did not answer: localhost:28028 accepted the query but answered nothing "
            "within 10 s.",
        ),
    ],
)
def test_why_ras_is_silent_is_one_sentence(ras, said):
    v, snap = verdict_and_snap()
    assert explain_nccl(record(ras=ras), v, snap).findings == (said,)


def test_a_job_without_nccl_gets_no_ras_finding_only_the_reason_in_its_entry():
    v, snap = verdict_and_snap()
    ras = {"nccl": {"loaded": False, "version": None}, "queries": [{"outcome": "refused"}]}
    ev = explain_nccl(record(ras=ras), v, snap)
    assert ev.findings == ()
    assert ev.extra["why"] == (
        "The job has not loaded NCCL (no libnccl in its memory map), so there is no RAS."
    )


def test_the_flight_recorders_missing_rank_is_a_finding():
    v, snap = verdict_and_snap()
    fr = {
        "outcome": "done",
        "dumps": [0, 1],
        "findings": [
            {
                "kind": "missing",
                "seq": 812,
                "group": "0:default_pg",
                "collective": "nccl:all_reduce",
                "missing_ranks": [1],
                "expected_ranks": [0, 1],
                "frame": "step (train.py:44)",
            }
        ],
    }
    ev = explain_nccl(record(flightrec=fr), v, snap)
    assert ev.findings == (
        "flight recorder: not all ranks joined collective 812 (all_reduce, group "
        "0:default_pg): missing rank 1.",
    )


def test_a_flight_recorder_that_could_not_run_says_why():
    v, snap = verdict_and_snap()
    fr = {"outcome": "no_reader", "error": "no rank read its dump pipe"}
    assert explain_nccl(record(flightrec=fr), v, snap).findings == (
        "flight recorder: no rank read its dump pipe",
    )


@pytest.mark.parametrize(
    "rec",
    [
        {"type": "stacks"},
        {"type": "nccl", "ras": "x", "flightrec": 3},
        {"type": "nccl", "ras": {"queries": [{"outcome": "done", "answer": {"format": "yaml"}}]}},
        {
            "type": "nccl",
            "ras": {"queries": ["x", None]},
            "flightrec": {"outcome": "done", "findings": ["x", 1]},
        },
    ],
)
def test_a_malformed_record_never_raises(rec):
    v, snap = verdict_and_snap()
    ev = explain_nccl(rec, v, snap)
    assert isinstance(ev.findings, tuple)
