"""One ranking of evidence (gputui/diagnose/ranking.py) and the verdict it builds (fold).

The findings here are the sentences the explainers really emit, one per level; the verdicts
come from the detector on synthetic readings (tests/synth.py). Covers: each level beats
every level below it, whatever order the sources reported in; equal strengths keep their
order; a sentence said twice is kept once at its strongest; the headline (`reason`) is the
strongest finding's lead when it beats NVML, else the detector's sentence; `culprit_frame`
follows the strongest framed finding; two sources that name different ranks are both kept
and the disagreement is named; the next steps follow from what is known.
"""

from __future__ import annotations

import itertools

from synth import timeline

from gputui.diagnose.evidence import Evidence, fold
from gputui.diagnose.hang.detector import Detector
from gputui.diagnose.ranking import Finding, Strength, rank, strongest
from gputui.diagnose.verdict import Verdict

ONE_PER_LEVEL = [
    Finding("rank 1 (GPU 1) hit Xid 79: GPU fell off the bus", Strength.HARDWARE, "health"),
    Finding("rank 1 died: CUDA error: an illegal memory access", Strength.RANK_GONE, "lastwords"),
    Finding(
        "ranks entered different collectives: rank 0 in broadcast (train.py:53), "
        "rank 1 in all_reduce (train.py:57)",
        Strength.MISMATCH,
        "stacks",
        ranks=(1,),
        frame="step (train.py:57)",
        headline="ranks in different collectives: rank 0 in broadcast (train.py:53), "
        "rank 1 in all_reduce (train.py:57)",
    ),
    Finding(
        "rank 1 (pid 815) is in load_batch (worker2.py:37)",
        Strength.CULPRIT_LINE,
        "stacks",
        ranks=(1,),
        frame="load_batch (worker2.py:37)",
    ),
    Finding("NCCL RAS: rank 1 (pid 815) is behind in AllReduce", Strength.RAS_BEHIND, "ras"),
    Finding("GPU 0 has been spinning in a collective for 12 s", Strength.NVML, "nvml"),
    Finding("NCCL RAS did not answer: connection refused.", Strength.CONTEXT, "ras"),
]


def stalled() -> Verdict:
    """The detector's verdict on a 2-GPU job where GPU 0 spins and GPU 1 idles."""
    d = Detector(2.0, 60.0)
    v = None
    for s in timeline((3, ["spin", "idle"])):
        v = d.update(s)
    assert v is not None and v.state == "stalled"
    return v


def test_each_level_beats_every_level_below_it_whatever_the_order_given():
    for order in itertools.permutations(range(len(ONE_PER_LEVEL)), len(ONE_PER_LEVEL)):
        got = rank(ONE_PER_LEVEL[i] for i in order)
        assert list(got) == ONE_PER_LEVEL
        if order[0] > 3:  # 5040 permutations: a sample is plenty
            break
    strengths = [f.strength for f in ONE_PER_LEVEL]
    assert strengths == sorted(strengths, reverse=True) and len(set(strengths)) == 7


def test_equal_strengths_keep_the_order_given_and_a_repeat_is_kept_once_at_its_strongest():
    a = Finding("a", Strength.CONTEXT, "x")
    b = Finding("b", Strength.CONTEXT, "y")
    a_strong = Finding("a", Strength.RAS_BEHIND, "z")
    assert rank([b, a]) == (b, a)
    assert rank([a, b, a_strong]) == (a_strong, b)


def test_context_or_nvml_never_lead():
    assert strongest([ONE_PER_LEVEL[-1], ONE_PER_LEVEL[-2]]) is None
    assert strongest(ONE_PER_LEVEL[3:]) is ONE_PER_LEVEL[3]


def test_the_headline_is_the_strongest_finding_and_the_nvml_sentence_stays_in_ranked():
    v = stalled()
    ev = Evidence("stacks", ranked=tuple(reversed(ONE_PER_LEVEL[2:5])))
    out = fold(v, [ev])
    assert out.reason == ONE_PER_LEVEL[2].headline
    assert out.culprit_frame == "step (train.py:57)"  # the strongest framed finding
    assert out.findings == tuple(f.text for f in ONE_PER_LEVEL[2:5])
    assert [f.strength for f in out.ranked] == [
        Strength.MISMATCH,
        Strength.CULPRIT_LINE,
        Strength.RAS_BEHIND,
        Strength.NVML,
    ]
    assert out.ranked[-1].text == v.reason  # the detector's sentence, ranked as NVML


def test_without_a_finding_stronger_than_nvml_the_detectors_sentence_is_the_headline():
    v = stalled()
    out = fold(v, [Evidence("nccl", ranked=(ONE_PER_LEVEL[-1],))])
    assert out.reason == v.reason
    assert out.findings == (ONE_PER_LEVEL[-1].text,) and out.culprit_frame is None


def test_two_sources_naming_different_ranks_are_both_shown_and_the_disagreement_named():
    v = stalled()
    stacks = Finding("rank 1 is in f (a.py:3)", Strength.CULPRIT_LINE, "stacks", ranks=(1,))
    ras = Finding("NCCL RAS: rank 0 is behind", Strength.RAS_BEHIND, "ras", ranks=(0,))
    out = fold(v, [Evidence("stacks", ranked=(stacks,)), Evidence("ras", ranked=(ras,))])
    assert out.findings == (  # each source, then the disagreement: it never leads
        stacks.text,
        ras.text,
        "sources disagree: the stacks name rank 1, NCCL RAS names rank 0",
    )
    assert out.reason == stacks.text


def test_the_next_steps_follow_from_what_is_known():
    v = stalled()
    before = " ".join(v.next_steps)
    assert "`gputui dump --job" in before and "TORCH_FR_BUFFER_SIZE" in before
    stacks = ({"pid": 815, "rank": 1, "outcome": "done", "role": "suspect"},)
    culprit = ONE_PER_LEVEL[3]
    culprit = Finding(
        culprit.text, culprit.strength, "stacks", (1,), pids=(815,), frame=culprit.frame
    )
    out = fold(v, [Evidence("stacks", ranked=(culprit,), stacks=stacks)])
    steps = " ".join(out.next_steps)
    assert "`gputui dump 815` shows it again" in steps
    assert "--job" not in steps and "Dump every rank" not in steps  # the dump is in
    # The flight recorder on: not advised again.
    fr = Evidence("nccl", extra={"flightrec": {"findings": [], "dumps": [0, 1]}})
    steps = " ".join(fold(v, [fr]).next_steps)
    assert "TORCH_FR_BUFFER_SIZE" not in steps and "flight recorder is on already" in steps
    # A mismatch: its call sites.
    mm = Evidence("stacks", ranked=(ONE_PER_LEVEL[2],), stacks=stacks)
    first = fold(v, [mm]).next_steps[0]
    assert first.startswith(
        "The ranks called different collectives (rank 0 in broadcast (train.py:53), rank 1 "
        "in all_reduce (train.py:57))"
    )


def test_ranked_findings_reach_check_json():
    from gputui.diagnose.verdict import verdict_to_json

    out = fold(stalled(), [Evidence("stacks", ranked=(ONE_PER_LEVEL[3],))])
    d = verdict_to_json(out)
    assert [r["strength"] for r in d["ranked"]] == ["culprit_line", "nvml"]
    assert d["ranked"][0]["frame"] == "load_batch (worker2.py:37)"
    assert list(d)[:5] == ["t", "state", "spinning", "suspects", "reason"]


def test_the_flight_recorders_type_mismatch_is_a_mismatch_with_its_line():
    """The analyzer's own words (torch's flight_recorder MatchInfo) for rank 1 in broadcast."""
    from gputui.diagnose.nccl.ras import explain_nccl

    err = (
        "Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: "
        "'allreduce' does not match found collective type: 'broadcast'"
    )
    fr = {
        "outcome": "done",
        "dumps": [0, 1],
        "findings": [
            {
                "kind": "errors",
                "seq": 5,
                "collective": "nccl:all_reduce",
                "error": err,
                "frame": "train_step (train.py:57)",
            }
        ],
    }
    rec = {"type": "nccl", "t": 1.0, "job": "j", "flightrec": fr, "local": [{"pid": 9, "rank": 1}]}
    v = stalled()
    out = fold(v, [explain_nccl(rec, v, None)])
    assert out.reason == (
        "ranks in different collectives: rank 1 in broadcast, the others in allreduce at "
        "train_step (train.py:57) (flight recorder, collective 5)"
    )
    top = out.ranked[0]
    assert (top.strength, top.source, top.ranks, top.pids) == (
        Strength.MISMATCH,
        "flightrec",
        (1,),
        (9,),
    )
    assert out.culprit_frame == "train_step (train.py:57)"
    steps = " ".join(out.next_steps)
    assert "flight recorder is on already" in steps and "TORCH_FR_BUFFER_SIZE" not in steps


def test_a_disagreement_between_two_mismatches_never_takes_the_headline():
    """Seen on the GPU machine: RAS said rank 1 is ahead in Broadcast, the flight recorder
    named rank 0 for the same mismatch; the headline stays RAS's sentence."""
    v = stalled()
    ras = Finding(
        "ranks in different collectives (NCCL RAS): rank 1 ...",
        Strength.MISMATCH,
        "ras",
        ranks=(1,),
    )
    fr = Finding(
        "flight recorder: collective 49 does not match", Strength.MISMATCH, "flightrec", ranks=(0,)
    )
    out = fold(v, [Evidence("nccl", ranked=(ras, fr))])
    assert out.reason == ras.text
    assert out.findings[-1].startswith("sources disagree: ")


def test_a_gone_rank_whose_cause_is_known_is_not_also_said_to_have_just_exited():
    v = stalled()
    gone = Finding(
        "rank 1 (pid 815) is gone: its process exited",
        Strength.CULPRIT_LINE,
        "stacks",
        ranks=(1,),
        pids=(815,),
    )
    why = Finding(
        "rank 1 (pid 815) died: RuntimeError: boom (train.py:9)",
        Strength.RANK_GONE,
        "lastwords",
        ranks=(1,),
        pids=(815,),
    )
    out = fold(v, [Evidence("stacks", ranked=(gone,)), Evidence("lastwords", ranked=(why,))])
    assert out.findings == (why.text,)
    # ...and with no cause known, the stacks' sentence is still the answer
    alone = fold(v, [Evidence("stacks", ranked=(gone,))])
    assert alone.findings == (gone.text,)
