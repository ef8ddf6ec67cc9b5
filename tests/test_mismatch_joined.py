"""Ranks in different collectives, named by their collectives and their lines.

With NCCL a collective returns at once and the rank's Python waits later, in
`torch.cuda.synchronize()`, so a stack dump of a mismatch shows every rank "in synchronize",
at different lines. Seen on 4 x H200 as the headline "ranks in different collectives: rank 0
in synchronize (…:36), rank 1 in synchronize (…:75)". NCCL RAS's per-type counts and the
flight recorder know the collectives; the stacks know the lines. The verdict joins them:
"rank 0 in all_reduce (multi_worker.py:36), rank 1 in broadcast (multi_worker.py:75)".

The RAS answer is the real one NCCL 2.28.9 gave during a broadcast-against-all_reduce hang
of a 2-rank job (tests/data/ras/onegpu, pids 1113 and 1114).
"""

from __future__ import annotations

from pathlib import Path

from test_ras_judge import q, record

from gputui.diagnose.collective_mismatch import joined_mismatch, op_name
from gputui.diagnose.evidence import fold
from gputui.diagnose.hang.culprit import explain_stacks
from gputui.diagnose.nccl.ras import explain_nccl
from gputui.diagnose.ranking import Strength
from gputui.diagnose.verdict import Verdict

RAS = Path(__file__).parent / "data" / "ras" / "onegpu" / "ras-onegpu-mismatch-json.txt"
SYNC = ["synchronize", "torch/cuda/__init__.py", 1083]


def stacks(lines: dict[int, int], collective=SYNC) -> dict:
    """A stacks record of two NCCL ranks waiting in `collective`, called from these lines
    of multi_worker.py (rank -> line), pids 1113 and 1114 as in the RAS answer."""
    ranks = [
        {
            "pid": 1113 + rank,
            "rank": rank,
            "gpu": 0,
            "outcome": "done",
            "frames": [
                collective,
                ["step", "multi_worker.py", line],
                ["<module>", "multi_worker.py", 300],
            ],
            "error": None,
        }
        for rank, line in lines.items()
    ]
    return {"type": "stacks", "t": 1000.0, "job": "master:h:29500", "ranks": ranks}


def everyone_spins() -> Verdict:
    """Both ranks share GPU 0 (NCCL_HOSTID), which spins: NVML names no suspect."""
    return Verdict(t=1000.0, state="stalled", spinning=(0,), suspects=(), since=990.0)


def ras_record() -> dict:
    name = RAS.relative_to(RAS.parents[1]).as_posix()
    return record(ras={"queries": [q(name, 10.0), q(name, 13.0)]})


def test_the_stacks_alone_say_the_ranks_stopped_at_different_lines():
    v = everyone_spins()
    out = fold(v, [explain_stacks(stacks({0: 36, 1: 75}), v, None)])
    assert out.ranked[0].strength == Strength.MISMATCH
    assert out.reason == (
        "ranks stopped at different lines (in synchronize): rank 0 at multi_worker.py:36, "
        "rank 1 at multi_worker.py:75"
    )
    assert "NCCL RAS or the flight recorder names the collectives" in out.ranked[0].text


def test_ras_names_each_ranks_collective_and_the_stacks_its_line():
    v = everyone_spins()
    out = fold(
        v,
        [explain_stacks(stacks({0: 36, 1: 75}), v, None), explain_nccl(ras_record(), v, None)],
    )
    assert out.reason == (
        "ranks in different collectives: rank 0 in all_reduce (multi_worker.py:36), "
        "rank 1 in broadcast (multi_worker.py:75)"
    )
    top = out.ranked[0]
    assert top.source == "mismatch" and top.ranks == (1,)
    assert top.text.endswith("(collectives from NCCL RAS, lines from the stacks)")
    assert out.culprit_frame == "step (multi_worker.py:75)"
    # the sources' own sentences stay below it
    assert any(f.source == "stacks" and f.strength == Strength.MISMATCH for f in out.ranked[1:])
    assert any(f.source == "ras" and f.strength == Strength.MISMATCH for f in out.ranked[1:])


def test_the_flight_recorder_names_the_collectives_when_ras_cannot():
    err = (
        "Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: "
        "'nccl:all_reduce' does not match found collective type: 'nccl:broadcast'"
    )
    fr = {
        "outcome": "done",
        "dumps": [0, 1],
        "findings": [{"kind": "errors", "seq": 5, "error": err}],
    }
    v = everyone_spins()
    ev = [
        explain_stacks(stacks({0: 36, 1: 75}), v, None),
        explain_nccl(record(flightrec=fr), v, None),
    ]
    out = fold(v, ev)
    assert out.reason == (
        "ranks in different collectives: rank 0 in all_reduce (multi_worker.py:36), "
        "rank 1 in broadcast (multi_worker.py:75)"
    )
    assert "collectives from the flight recorder" in out.ranked[0].text


def test_ranks_at_the_same_line_in_the_same_collective_are_no_mismatch():
    v = everyone_spins()
    found = explain_stacks(stacks({0: 36, 1: 36}), v, None).all_findings()
    assert joined_mismatch(found, [], []) is None


def test_nccl_and_torch_names_of_collectives_are_one_name():
    assert op_name("AllReduce") == op_name("nccl:all_reduce") == "all_reduce"
    assert op_name("Broadcast") == op_name("broadcast") == "broadcast"
    assert op_name("ReduceScatter") == "reduce_scatter" and op_name("AllGather") == "all_gather"
    assert op_name("") is None and op_name(5) is None


def test_junk_in_the_sources_is_ignored_not_trusted():
    v = everyone_spins()
    found = explain_stacks(stacks({0: 36, 1: 75}), v, None).all_findings()
    junk = [{"mismatch_ops": {"x": "AllReduce", "1": 7}}, {"flightrec": {"findings": "no"}}, 5]
    assert joined_mismatch(found, [], junk) is None
