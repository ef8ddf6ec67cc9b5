"""Ranks that NVML cannot tell apart: two ranks of one job on one GPU, and every GPU spinning.

The data is real: `h100-shared-gpu-stuck.trace.jsonl.gz` is `gputui record` on one H100
while a 2-rank NCCL job (scripts/device/multi_worker.py --share-gpu: each rank its own
NCCL_HOSTID, so NCCL connects them as two nodes over sockets) hung with rank 1 asleep in
load_next_batch_stuck() and rank 0 waiting in all_reduce. The recording holds the auto-dump's
stacks and the NCCL record (RAS twice, the flight recorder's analyzer) taken at the stall;
`ras/onegpu/` holds the raw RAS answers of the same job (scripts/device/check_one_gpu_hang.sh).

NVML sees one spinning GPU and names no suspect. The verdict must still name rank 1, its pid
and its line: from the stacks (the rank outside any collective on a GPU where another rank
waits in one) and from NCCL (RAS's count behind, the flight recorder's missing rank).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputui.collect.nccl.ras_parse import parse_answer
from gputui.collect.trace.format import read_trace
from gputui.diagnose.evidence import Evidence, fold
from gputui.diagnose.hang.culprit import explain_stacks
from gputui.diagnose.hang.detector import Detector
from gputui.diagnose.nccl.ras import explain_nccl
from gputui.diagnose.verdict import Verdict
from gputui.ui.widgets.banner import headline

DATA = Path(__file__).parent / "data"
SHARED = DATA / "h100-shared-gpu-stuck.trace.jsonl.gz"
FRAME = "load_next_batch_stuck (multi_worker.py:192)"
RANK1_PID = 463


def replay_to_end() -> tuple[Verdict, dict[str, dict]]:
    """The detector's last verdict over the recording, and the records it carries by type."""
    det, v, records = Detector(), None, {}
    for snap in read_trace(SHARED):
        v = det.update(snap)
        for r in snap.records:
            records[r["type"]] = r
    assert v is not None
    return v, records


def test_nvml_sees_one_spinning_gpu_and_says_the_ranks_share_it():
    v, _ = replay_to_end()
    assert v.state == "stalled" and v.spinning == (0,) and v.suspects == ()
    assert "2 local ranks share that GPU" in v.reason
    assert "other nodes" not in v.reason  # both ranks are here: no point looking elsewhere


def test_the_stacks_alone_name_the_rank_outside_the_collective():
    v, records = replay_to_end()
    ev = explain_stacks(records["stacks"], v, None)
    assert ev.culprit_frame == FRAME and ev.suspect_pids == (RANK1_PID,)
    roles = {e["rank"]: (e["role"], e["collective"]) for e in ev.stacks}
    assert roles == {0: ("waiting", "synchronize"), 1: ("suspect", None)}
    folded = fold(v, [ev])
    assert folded.suspect_pids == (RANK1_PID,) and folded.culprit_frame == FRAME


def test_nccl_names_the_same_rank_from_its_counts_and_the_flight_recorder():
    v, records = replay_to_end()
    ev = explain_nccl(records["nccl"], v, None)
    assert ev.suspect_pids == (RANK1_PID,)
    text = " ".join(ev.findings)
    assert "rank 1" in text and "behind" in text and "missing rank 1" in text


def test_check_replays_the_recording_to_the_culprits_line(capsys):
    from gputui.cli import main

    assert main(["check", "--replay", str(SHARED), "--json"]) == 1
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["culprit_frame"] == FRAME and last["suspect_pids"] == [RANK1_PID]


def test_the_banner_names_the_suspect_pid_where_nvml_named_no_gpu():
    v, records = replay_to_end()
    folded = fold(v, [explain_stacks(records["stacks"], v, None)])
    _, text = headline(folded, now=folded.t)
    assert f"suspect pid {RANK1_PID}" in text and "no suspect" not in text


def test_a_lone_rank_outside_a_collective_on_a_spinning_gpu_stays_waiting():
    """Collectives are asynchronous: a rank alone on its spinning GPU may have left the call."""
    v, records = replay_to_end()
    rec = json.loads(json.dumps(records["stacks"]))
    rec["ranks"] = [r for r in rec["ranks"] if r["rank"] == 1]
    ev = explain_stacks(rec, v, None)
    assert ev.culprit_frame is None and ev.suspect_pids == ()
    assert ev.stacks[0]["role"] == "waiting"


def test_nccl_corroborates_a_rank_the_stacks_could_not_judge():
    """Every GPU spins; rank 1's Python is outside any collective, which alone proves
    nothing. RAS says rank 1 is behind: its stack becomes the suspect's, its frame the line."""
    v = Verdict(t=2.0, state="stalled", spinning=(0, 1), suspects=())
    stacks = Evidence(
        "stacks",
        findings=("rank 1 (pid 11) is in load (train.py:9) while its GPU spins",),
        stacks=(
            {
                "pid": 10,
                "rank": 0,
                "gpu": 0,
                "role": "waiting",
                "outcome": "done",
                "frame": "step (train.py:20)",
                "collective": "all_reduce",
            },
            {
                "pid": 11,
                "rank": 1,
                "gpu": 1,
                "role": "waiting",
                "outcome": "done",
                "frame": "load (train.py:9)",
                "collective": None,
            },
        ),
    )
    nccl = Evidence("nccl", findings=("NCCL RAS: rank 1 ... is behind",), suspect_pids=(11,))
    out = fold(v, [stacks, nccl])
    assert out.culprit_frame == "load (train.py:9)" and out.suspect_pids == (11,)
    assert [e["role"] for e in out.stacks] == ["waiting", "suspect"]
    assert fold(v, [stacks]).culprit_frame is None  # without NCCL: no claim


def test_nccl_records_of_the_wrong_shape_name_no_one():
    v = Verdict(t=2.0, state="stalled", spinning=(0,), suspects=())
    for bad in ({"flightrec": "x"}, {"local": 5, "ras": []}, {"flightrec": {"findings": [3]}}):
        ev = explain_nccl({"type": "nccl", **bad}, v, None)
        assert ev.suspect_pids == ()


def ras(name: str) -> str:
    return (DATA / "ras" / "onegpu" / f"ras-onegpu-{name}.txt").read_text()


def test_the_real_two_rank_ras_answers_read_the_same_in_text_and_json():
    for form in ("text", "json"):
        (c,) = parse_answer(ras(f"a-{form}")).comms
        r0, r1 = c.rank(0), c.rank(1)
        assert (r0.pid, r0.gpu, r0.counts["AllReduce"]) == (462, 0, 1457)
        assert (r1.pid, r1.gpu, r1.counts["AllReduce"]) == (463, 0, 1456)


def test_nccls_json_for_a_rank_gone_is_malformed_and_its_text_says_the_same():
    """NCCL 2.28.9 leaves out the comma after "nvml_dev" in a missing rank (captured on the
    device when rank 1 raised and exited): the JSON is refused, the text answer read."""
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_answer(ras("exit-json"))
    (c,) = parse_answer(ras("exit-text")).comms
    assert c.size == 2 and "INCOMPLETE" in c.errors
    assert [(m.rank, m.pid) for m in c.missing] == [(1, 898)]


def test_the_real_collective_mismatch_reads_as_counts_that_cross():
    for form in ("text", "json"):
        (c,) = parse_answer(ras(f"mismatch-{form}")).comms
        r0, r1 = c.rank(0), c.rank(1)
        assert r1.counts["Broadcast"] > r0.counts.get("Broadcast", 0)
        assert r1.counts["AllReduce"] < r0.counts["AllReduce"]


def recording_where_rank1_exits(tmp_path: Path, after_s: float) -> Path:
    """The real recording, with rank 1 (pid 463) gone from every sample `after_s` seconds in:
    rank 0 keeps the GPU spinning, as it did on the device when rank 1 raised and exited."""
    import gzip

    lines = gzip.open(SHARED, "rt").read().splitlines()
    t0 = json.loads(lines[0])["t"]
    out = []
    for line in lines:
        d = json.loads(line)
        if "type" in d:
            if d["type"] == "meta" or d["t"] - t0 < after_s:
                out.append(line)  # records from before the exit only
            continue
        if d["t"] - t0 >= after_s:
            d["pids"] = [p for p in d["pids"] if p != RANK1_PID]
            d["proc_mem"] = [m for m in d["proc_mem"] if m[0] != RANK1_PID]
            d["procs"] = [p for p in d["procs"] if p["pid"] != RANK1_PID]
        out.append(json.dumps(d))
    path = tmp_path / "exit.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path


def test_a_rank_that_exits_beside_a_waiting_rank_is_named_gone(tmp_path):
    """The GPU stays in use (rank 0 spins on it), so NVML shows no vanished GPU; the pid that
    left the job is the suspect, and the stacks say it is gone."""
    det, v = Detector(), None
    for snap in read_trace(recording_where_rank1_exits(tmp_path, after_s=5.0)):
        v = det.update(snap)
    assert v is not None and v.state == "stalled" and v.suspects == ()
    assert v.gone == ((RANK1_PID, 1),) and v.suspect_pids == (RANK1_PID,)
    assert f"rank 1 (pid {RANK1_PID}) (its process has exited)" in v.reason
    rec = {"type": "stacks", "t": v.t, "job": "j", "ranks": []}  # the dump found no rank 1
    ev = explain_stacks(rec, v, None)
    assert f"rank 1 (pid {RANK1_PID}) is gone: its process exited" in ev.findings
    assert [(e["pid"], e["role"], e["outcome"]) for e in ev.stacks] == [
        (RANK1_PID, "suspect", "gone")
    ]


def test_the_exporter_names_the_gone_rank_as_its_suspect(tmp_path):
    """`gputui_job_suspect` for the pid that left, on the GPU it held (no attach needed)."""
    from gputui.exporter.metrics import GputuiCollector
    from gputui.exporter.view import Watch

    watch = Watch(Detector(), host="vm")
    for snap in read_trace(recording_where_rank1_exits(tmp_path, after_s=5.0)):
        watch.on_snapshot(snap)
    families = [m for m in GputuiCollector(watch).collect() if m.name == "gputui_job_suspect"]
    labels = [s.labels for m in families for s in m.samples]
    assert [(x["gpu"], x["rank"], x["pid"]) for x in labels] == [("0", "1", str(RANK1_PID))]


def test_a_healthy_job_forgets_a_rank_that_left_long_ago(tmp_path):
    """Departed pids are kept while the job stalls, and dropped `hang_after` s after, when not."""
    from gputui.diagnose.job_groups import Group

    g = Group("j", None, departed={5: (0.0, 1, 0), 6: (90.0, 2, 0)})
    g.forget_before(60.0)
    assert g.departed == {6: (90.0, 2, 0)}


def test_every_rank_here_at_one_line_is_not_sent_to_other_nodes():
    """Both ranks local, both at the same sync line (the device's mismatch run: broadcast on
    one, all_reduce on the other, then the same synchronize): no "another node" claim."""
    v, records = replay_to_end()
    rec = json.loads(json.dumps(records["stacks"]))
    rec["ranks"][1]["frames"] = rec["ranks"][0]["frames"]
    snap = list(read_trace(SHARED))[-1]
    text = " ".join(explain_stacks(rec, v, snap).findings)
    assert "every rank of the job is here" in text and "another node" not in text
