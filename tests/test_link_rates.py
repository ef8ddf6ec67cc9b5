"""NVLink and PCIe error counters as rates against the node's own baseline
(gputui.diagnose.health.link_rates), and where a link that stands out is named.

The reads are health records as the live monitor writes them (tests/linkreads.py), with the
rates and totals that healthy 4 x H200 GPUs showed at rest; a replay hands back the same
records, so these are also the replay's rules.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest
from linkreads import health, passes, read, with_records
from synth import timeline

from gputui.collect.trace.format import read_trace
from gputui.diagnose.health.judge import HealthTracker
from gputui.diagnose.health.link_rates import LinkRates
from gputui.diagnose.health.report import health_key, health_line, health_text
from gputui.diagnose.ranking import Strength
from gputui.watch.watcher import Watcher

STRAGGLER = Path(__file__).parent / "data" / "h200x4-straggler-4x.jsonl.gz"


def rates(records: list[dict]) -> LinkRates:
    r = LinkRates()
    for rec in records:
        r.add_record(rec.get("nvlink"))
    return r


def test_healthy_links_with_thousands_of_errors_since_boot_name_nothing():
    r = rates(passes(3))
    assert r.findings() == ()
    assert sum(r.since_boot(0).values()) > 8_000  # counted since boot: context only
    assert r.baseline("crc") == 15.0  # the median link (GPUs read 12-18 a minute)
    assert r.baseline("replay") == 3.0


def test_a_link_whose_crc_errors_jump_is_named_with_its_gpu_and_link():
    r = rates(passes(2, bad={(3, 7): 4_100.0}))
    (f,) = r.findings()
    assert (f.gpu, f.link, f.kind) == (3, 7, "crc")
    assert f.text == "GPU 3 link 7: NVLink CRC errors at 4,118/min against the node's 14/min"


def test_a_rate_needs_a_full_pass_between_two_reads_of_the_gpu():
    early = [health(1000.0, read(0, 1000.0, 0.0)), health(1020.0, read(0, 1020.0, 1 / 3))]
    assert rates(early).rates == {}  # 20 s apart in a 60 s pass: no rate yet
    bad = {(0, 2): 9_000.0}
    jump = [health(1000.0, read(0, 1000.0, 0.0)), health(1020.0, read(0, 1020.0, 1 / 3, bad=bad))]
    assert rates(jump).findings() == ()


def test_a_counter_that_went_down_gives_no_rate_for_that_interval():
    recs = passes(2)
    later = recs[-1]["nvlink"]["reads"][0]
    later["links"][5] = [0, 0, 0, 0]  # the driver was reloaded: counters start again
    r = rates(recs)
    assert 5 not in r.rates[3] and r.findings() == ()


def test_one_bad_gpu_of_four_does_not_move_the_baseline():
    bad = {(2, k): 500.0 for k in range(18)}  # a bad switch port: every link of GPU 2
    r = rates(passes(2, bad=bad))
    assert {(f.gpu, f.link) for f in r.findings()} == {(2, k) for k in range(18)}
    assert r.baseline("crc") == 14.0


def test_a_noisy_node_names_only_a_link_ten_times_its_own_rate():
    noisy = {(g, k): 150.0 for g in range(4) for k in range(18)}
    assert rates(passes(2, bad={**noisy, (1, 4): 900.0})).findings() == ()
    (f,) = rates(passes(2, bad={**noisy, (1, 4): 2_000.0})).findings()
    assert (f.gpu, f.link) == (1, 4) and f.baseline > 150.0


def test_on_a_quiet_node_a_link_is_named_only_above_the_floor():
    assert rates(passes(2, gpus=1, links=2, bad={(0, 1): 60.0})).findings() == ()
    (f,) = rates(passes(2, gpus=1, links=2, bad={(0, 1): 120.0})).findings()
    assert f.link == 1 and f.per_min == 132.0


def test_pcie_replays_are_a_rate_against_the_nodes_gpus():
    r = LinkRates()
    for t, values in ((1000.0, (5, 5, 5)), (1060.0, (6, 5, 905))):
        for gpu, v in enumerate(values):
            r.add_pcie(gpu, t, v)
    (f,) = r.findings()
    assert f.text == "GPU 2: PCIe replays at 900/min against the node's 0/min"


def test_a_malformed_nvlink_part_is_skipped_not_raised():
    r = LinkRates()
    for part in (
        7,
        {"reads": 3},
        {"pass_s": "x", "reads": [1, {"gpu": -1, "t": 1}, {"gpu": 0, "t": "x"}]},
        {"reads": [{"gpu": 0, "t": 1.0, "links": [[1, 2], "x", [1, 2, 3, True], None]}]},
        {"reads": [{"gpu": 0, "t": 100.0, "links": [[1e99, 1, 1, 1]], "na": {"a": 3}}]},
    ):
        r.add_record(part)
    assert r.findings() == () and r.rates.get(0, {}) == {}


def tracker_over(records: list[dict]) -> tuple[HealthTracker, object]:
    t = HealthTracker()
    snaps = list(with_records(timeline((240, ["idle"] * 4)), records))
    for s in snaps:
        t.update(s)
    return t, snaps[-1]


def test_check_json_health_names_the_link_and_shows_totals_as_context():
    t, snap = tracker_over(passes(3, bad={(3, 7): 4_100.0}))
    h = health_line(t, snap)["health"]
    (f,) = h["findings"]
    assert (f["gpu"], f["link"], f["counter"], f["strength"]) == (3, 7, "crc", "context")
    assert h["nvlink"]["baseline_per_min"]["crc"] == 14.0
    g3 = h["gpus"]["3"]
    assert g3["health"] == "ok"  # a rate is a finding, never a health word
    assert g3["nvlink"]["links_read"] == 18 and g3["nvlink"]["errors_since_boot"]["total"] > 8_000
    text = health_text(t, snap)
    assert "health: GPU 3 link 7: NVLink CRC errors at 4,118/min against the node's 14/min" in text
    assert any(x.startswith("  NVLink errors since boot (context, not health)") for x in text)


def test_the_json_line_changes_when_a_link_is_named_not_at_every_read():
    t, _ = tracker_over(passes(3))
    quiet = health_key(t)
    t2, _ = tracker_over(passes(4))
    assert health_key(t2) == quiet
    t3, _ = tracker_over(passes(3, bad={(1, 2): 500.0}))
    assert health_key(t3) != quiet


def test_an_8_gpu_pass_in_the_record_stays_small():
    """A read is one GPU's 18 links x 4 counters: about 0.5 KB, one GPU per slot, so an 8-GPU
    node adds about 4 KB a minute to a recording (its samples add ~100x that)."""
    recs = passes(1, gpus=8)
    sizes = [len(json.dumps(r["nvlink"]["reads"][0], separators=(",", ":"))) for r in recs]
    assert max(sizes) < 600


# ---------------------------------------------------------------- in the verdict


def watch(snaps) -> list:
    w = Watcher(10.0, 60.0, gatherers=(), live=False)
    try:
        return [w.update(s) for s in snaps]
    finally:
        w.close()


def rank1_hangs(records: list[dict]):
    """Two ranks compute, then rank 1 stops entering the collective and rank 0 spins."""
    snaps = timeline((2, ["compute", "compute"]), (60, ["spin", "idle"]))
    return with_records(snaps, records)


def test_a_link_of_the_hangs_suspect_is_named_beside_it_not_as_its_headline():
    v = watch(rank1_hangs(passes(2, gpus=2, t0=940.0, bad={(1, 7): 4_100.0})))[-1]
    assert v.state in ("stalled", "hung") and v.suspects == (1,)
    said = [f for f in v.ranked if f.source == "health"]
    assert [f.text for f in said] == [
        "rank 1 (GPU 1) link 7: NVLink CRC errors at 4,114/min against the node's 12/min"
    ]
    assert said[0].strength == Strength.CONTEXT and said[0].ranks == (1,)
    assert "link" not in v.reason  # corrected errors slow a link; they do not stop a job
    plain = watch(rank1_hangs([]))[-1]
    assert v.suspect_pids == plain.suspect_pids and v.reason == plain.reason


def test_a_link_on_a_spinning_gpu_of_a_job_without_suspects_names_no_suspect():
    snaps = timeline((2, ["compute", "compute"]), (60, ["spin", "spin"]))
    v = watch(with_records(snaps, passes(2, gpus=2, t0=940.0, bad={(0, 2): 4_100.0})))[-1]
    plain = watch(timeline((2, ["compute", "compute"]), (60, ["spin", "spin"])))[-1]
    assert v.alarm and v.suspects == () and v.suspect_pids == plain.suspect_pids
    assert any(f.startswith("rank 0 (GPU 0) link 2: NVLink CRC errors") for f in v.findings)


def test_a_link_of_a_gpu_outside_the_hung_job_is_not_in_its_verdict():
    snaps = timeline((2, ["compute", "compute", "free"]), (60, ["spin", "idle", "free"]))
    v = watch(with_records(snaps, passes(2, gpus=3, t0=940.0, bad={(2, 3): 4_100.0})))[-1]
    assert v.alarm and not any(f.source == "health" for f in v.ranked)


@pytest.fixture(scope="module")
def straggler_snaps():
    return read_trace(STRAGGLER)


def with_link_reads(snaps, bad: dict) -> list:
    """The real 4 x H200 straggler recording with NVLink reads on a 10 s pass (the recording
    is 27 s long) added as the live monitor records them."""
    t0 = snaps[0].t - 5.0
    return list(with_records(snaps, passes(3, t0=t0, pass_s=10.0, bad=bad)))


def last_slow(snaps):
    """The verdict at the last sample that is slow (the recording ends with the job)."""
    return [v for v in watch(snaps) if v.state == "slow"][-1]


def test_the_stragglers_link_is_named_beside_the_slow_verdict(straggler_snaps):
    v = last_slow(with_link_reads(straggler_snaps, {(0, 3): 3_000.0}))
    assert v.state == "slow" and v.stragglers == (0,)
    assert v.findings[-1].startswith("GPU 0 link 3: NVLink CRC errors at 3,0")
    assert "slow: GPU 0 is the straggler" in v.reason  # it stays the headline


def test_a_waiting_ranks_link_is_not_named_beside_the_straggler(straggler_snaps):
    snaps = with_link_reads(straggler_snaps, {(2, 3): 3_000.0})
    v = last_slow(snaps)
    assert v.state == "slow" and not any("link" in f for f in v.findings)
    t = HealthTracker()
    for s in snaps:
        t.update(s)
    assert [f.where for f in t.links.findings()] == ["GPU 2 link 3"]  # a health finding


def test_a_recording_with_link_reads_replays_to_the_same_finding(straggler_snaps, tmp_path):
    from gputui.collect.trace.format import TraceWriter

    snaps = with_link_reads(straggler_snaps, {(0, 3): 3_000.0})
    live = last_slow(snaps)
    path = tmp_path / "rec.jsonl.gz"
    w = TraceWriter(path)
    try:
        for s in snaps:
            w.write(replace(s, records=()))
            for rec in s.records:
                w.write_record(rec)
    finally:
        w.close()
    with gzip.open(path, "rt") as f:
        assert sum('"nvlink"' in line for line in f) == 12
    again = last_slow(read_trace(path))
    assert again.findings == live.findings and live.findings[-1].startswith("GPU 0 link 3")


def test_the_exporter_has_each_gpus_worst_link_and_a_series_only_for_a_named_link():
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gputui.diagnose.hang.detector import Detector
    from gputui.exporter.run import make_registry
    from gputui.exporter.view import Watch

    w = Watch(Detector(), host="n1")
    for s in with_records(timeline((240, ["idle"] * 4)), passes(3, bad={(3, 7): 4_100.0})):
        w.on_snapshot(s)
    got: dict = {}
    for fam in text_string_to_metric_families(generate_latest(make_registry(w)).decode()):
        for x in fam.samples:
            if "nvlink" in x.name:
                labels = x.labels
                got[(x.name, labels["gpu"], labels.get("link"), labels["counter"])] = x.value
    worst = {k[1:]: v for k, v in got.items() if k[0] == "gputui_gpu_nvlink_error_rate_max"}
    assert len(worst) == 4 * 3  # 4 GPUs x (crc, replay, recovery), never one per link
    assert worst[("3", None, "crc")] == 4_118.0 and worst[("0", None, "crc")] == 12.0
    named = {k[1:]: v for k, v in got.items() if k[0] == "gputui_nvlink_error_rate"}
    assert named == {("3", "7", "crc"): 4_118.0}
