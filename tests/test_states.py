"""The verdict states are one vocabulary: one enum, one table, and no state spelled elsewhere.

Every face reads a state's meaning from gputui.diagnose.states (docs/recipes.md, "Add a
verdict rule"): the exit code of `check`, the banner's colour, the exporter's one-hot label,
which of two verdicts is the worse. These tests hold the table complete and consistent with
the exit-code table, and fail when a module spells a state as a string again
(tests/state_literals.py says what counts).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from state_literals import hits, spelled

from gputui.diagnose import exitcodes, states
from gputui.diagnose.states import MEANING, ORDER, State
from gputui.diagnose.verdict import Verdict, verdict_to_json

PKG = Path(__file__).resolve().parents[1] / "gputui"


def test_every_state_has_one_row_and_one_place_in_the_order():
    assert set(MEANING) == set(State)
    assert sorted(ORDER) == sorted(State) and len(ORDER) == len(set(ORDER))


def test_every_row_says_each_thing_a_face_needs():
    for s, m in MEANING.items():
        assert m.exit_code in dict(exitcodes.TABLE), s
        assert m.colour and m.colour.isidentifier(), s  # a theme variable's name
        assert m.label == s.value.upper(), s  # the badge the banner always showed
        assert m.exporter_value in (s.value, None), s


def test_the_words_are_the_ones_every_file_already_holds():
    # Recordings, `check --json` lines and Prometheus series written before the enum.
    assert [s.value for s in ORDER] == ["hung", "stalled", "slow", "busy", "ok"]
    assert states.EXPORTED == ("ok", "busy", "stalled", "hung")


def test_a_state_is_its_word_in_text_json_and_lookups():
    v = Verdict(t=1.0, state=State.HUNG)
    assert f"{v.state}" == str(v.state) == "hung" and f"{v.state:>6}" == "  hung"
    assert json.loads(json.dumps(verdict_to_json(v)))["state"] == "hung"
    assert {"hung": 1}[State.HUNG] == 1 and State.HUNG == "hung"
    assert State.OK in ("ok", "slow") and "stalled" in states.ALARMS


@pytest.mark.parametrize(
    ("word", "code", "code_fail_on_slow"),
    [
        ("ok", exitcodes.OK, exitcodes.OK),
        ("busy", exitcodes.OK, exitcodes.OK),
        ("slow", exitcodes.OK, exitcodes.SLOW),
        ("stalled", exitcodes.HANG, exitcodes.HANG),
        ("hung", exitcodes.HANG, exitcodes.HANG),
        ("sideways", exitcodes.OK, exitcodes.OK),  # unknown: healthy, never a false alarm
    ],
)
def test_exit_codes_come_from_the_table_as_the_documented_table_says(word, code, code_fail_on_slow):
    assert exitcodes.of_state(word) == code
    assert exitcodes.of_state(word, fail_on_slow=True) == code_fail_on_slow


def test_the_order_agrees_with_the_exit_codes_worst_first():
    # exitcodes.worst picks hang > sick GPU > slow > ok; the states' order may not disagree.
    codes = [MEANING[s].exit_code for s in ORDER]
    rank = {c: i for i, c in enumerate((exitcodes.HANG, exitcodes.SICK_GPU, exitcodes.SLOW, 0))}
    assert [rank[c] for c in codes] == sorted(rank[c] for c in codes)


def test_worse_and_severity_follow_the_order_and_forgive_unknown_words():
    assert states.worse("ok", "stalled") == "stalled"
    assert states.worse("hung", "stalled") == "hung"
    assert states.worse("busy", "ok") == "busy"
    assert states.worse("ok", "garbage") == "ok"  # a tie keeps the first
    assert states.severity("hung") > states.severity("stalled") > states.severity("slow")
    assert states.parse("HUNG") is None and states.parse(3) is None
    assert not states.is_alarm(["hung"]) and states.severity({}) == 0  # hostile input


def test_alarms_are_exactly_the_states_whose_verdict_alarms():
    for s in State:
        assert Verdict(t=0.0, state=s).alarm == MEANING[s].alarm == states.is_alarm(s.value)
    assert states.ALARMS == {State.STALLED, State.HUNG}


def test_the_palette_draws_each_state_on_its_tables_colour():
    from gputui.ui.widgets.palette import BLOCK_ROLES

    for s, m in MEANING.items():
        assert BLOCK_ROLES[s.value] == f"background: ${m.colour}; text-style: bold;"


def test_the_exporter_writes_the_tables_values():
    from gputui.exporter.view import JOB_STATES

    assert JOB_STATES == states.EXPORTED


def test_the_rule_sees_a_state_spelled_and_leaves_other_words_alone():
    spelled_as_state = [
        'v.state == "ok"',
        'if r.worst != "hung": pass',
        'state in ("stalled", "hung")',
        'Verdict(t=0, state="busy")',
        'd = {"state": "slow"}',
        '_ALARMS = ("stalled", "hung")',
        'CODES = {"ok": 0, "hung": 1}',
    ]
    other_words = [
        'reader.status == "hung"',  # NVML's call that did not return
        'WORDS = ("ok", "degraded", "failed")',  # a GPU's health word
        'pair = {"ok": True, "gbps": 1.0}',  # a probe pair's field
        'FLAG_TEXT = {"busy": ("busy", "busy")}',  # a process-table flag and its two labels
        '"""stalled or hung"""',  # prose
    ]
    for src in spelled_as_state:
        assert list(hits(ast.parse(src))), src
    for src in other_words:
        assert not list(hits(ast.parse(src))), src


def test_no_module_outside_states_spells_a_verdict_state_as_a_string():
    found = spelled(PKG)
    found.pop("diagnose/states.py", None)
    assert found == {}
