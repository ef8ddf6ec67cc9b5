"""What the RAS client noted about an answer is shown, as context, never as a cause.

The client adds a note to an answer when the listener's world size disagrees with the job's,
when the listener could not be tied to a rank, or when NCCL's malformed JSON was read as text
(gputui/collect/nccl/ras.py). Before, no face showed them: a reader could not tell why the
RAS sentence deserved less trust.
"""

from __future__ import annotations

from dataclasses import replace

from test_ras_judge import answer, q, record, verdict_and_snap

from gputui.collect.nccl.ras_model import answer_to_dict
from gputui.diagnose.nccl.ras import explain_nccl
from gputui.diagnose.ranking import Strength

NOTE = "NCCL RAS names a communicator of 8 ranks but the job's world size is 4"


def noted(name: str, t: float) -> dict:
    got = q(name, t)
    got["answer"] = answer_to_dict(replace(answer(name), notes=(NOTE,)))
    return got


def test_a_note_on_the_answer_is_a_context_finding_said_once():
    v, snap = verdict_and_snap()
    rec = record(
        ras={"queries": [noted("behind-4rank.json", 10.0), noted("behind-4rank.json", 13.0)]}
    )
    ev = explain_nccl(rec, v, snap)
    said = [f for f in ev.ranked if NOTE in f.text]
    assert [f.text for f in said] == [f"NCCL RAS (note): {NOTE}"]
    assert said[0].strength == Strength.CONTEXT
    assert ev.ranked[0].strength > Strength.CONTEXT  # the rank behind still leads
    assert ev.extra["notes"] == [NOTE]


def test_an_answer_without_notes_adds_none():
    v, snap = verdict_and_snap()
    rec = record(ras={"queries": [q("behind-4rank.json", 10.0), q("behind-4rank.json", 13.0)]})
    ev = explain_nccl(rec, v, snap)
    assert not any("(note)" in f for f in ev.findings) and "notes" not in ev.extra
