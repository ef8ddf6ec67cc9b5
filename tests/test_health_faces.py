"""GPU health on the faces: the dashboard at 80x24 and in panels, the bundle, the exporter.

The real 2 x H200 hang recording (the demo) is replayed with an Xid 79 on the suspect's GPU
added as the live monitor would record it: the headline and the GPU lines must say it.
"""

from __future__ import annotations

from dataclasses import replace

from hangs import hang_window
from screen import on_screen, run_to_end, screen_text

from gputui.collect.nvml.xid import XidEvent
from gputui.collect.source import ReplaySource
from gputui.ui.app import GputuiApp
from gputui.ui.widgets.gpu_board import GpuBoard


def with_xid(source: ReplaySource, gpu: int, xid: int, after_s: float = 2.0) -> ReplaySource:
    snaps = list(source.snaps)
    i = next(k for k, s in enumerate(snaps) if s.t - snaps[0].t >= after_s)
    ev = XidEvent(snaps[i].t, xid, "nvml", gpu=gpu)
    rec = {"type": "health", "t": snaps[i].t, "started": snaps[0].t, "events": [ev.to_json()]}
    snaps[i] = replace(snaps[i], records=(rec,))
    return ReplaySource(snaps, name="test", realtime=False)


async def test_a_failed_gpu_leads_the_banner_and_is_marked_at_80x24(demo_snaps):
    app = GputuiApp(with_xid(hang_window(demo_snaps), gpu=1, xid=79))
    async with app.run_test(size=(80, 24)) as pilot:
        await run_to_end(app, pilot)
        assert app.query_one(GpuBoard).mode == "compact"
        lines = screen_text(app)
        gpu1 = [ln for ln in lines if ln.startswith(" 1 ")]
        assert gpu1 and "✖" in gpu1[0], lines
        assert on_screen(app, "hit Xid 79"), lines
        assert all(len(ln) <= 80 for ln in lines)
        await pilot.resize_terminal(200, 60)
        await pilot.pause()
        assert on_screen(app, "✖ FAILED: Xid 79: GPU fell off the bus")


def test_the_bundle_has_health_json_and_its_trace_replays_the_xid(demo_snaps, tmp_path):
    import json

    from gputui.collect.trace.format import read_trace
    from gputui.tools.bundle.write import write_bundle

    snaps = with_xid(hang_window(demo_snaps, seconds=4), gpu=1, xid=79).snaps
    rep = write_bundle(tmp_path / "b", snapshots=snaps, processes=[], topo_timeout=5)
    assert "health.json" in rep.files
    health = json.loads((tmp_path / "b" / "health.json").read_text())
    assert health["gpus"]["1"]["health"] == "failed"
    assert [(x["xid"], x["gpu"]) for x in health["xids"]] == [(79, 1)]
    back = read_trace(tmp_path / "b" / "trace.jsonl.gz")
    assert [r["type"] for s in back for r in s.records] == ["health"]


def test_the_exporter_counts_xids_since_it_started_and_exports_health_gauges():
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families
    from synth import timeline

    from gputui.diagnose.hang.detector import Detector
    from gputui.exporter.run import make_registry
    from gputui.exporter.view import Watch

    def scrape(w: Watch) -> dict:
        text = generate_latest(make_registry(w)).decode()
        out: dict = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name.startswith("gputui_gpu_") and (
                    "xid" in s.name or "health" in s.name or "ecc" in s.name
                ):
                    out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    counters = {"0": {"lost": False, "ecc_uncorrected_volatile": 0}, "1": {"lost": False}}
    snaps = list(timeline((3, ["idle", "idle"])))
    old = XidEvent(900.0, 79, "kernel", gpu=1)  # before the exporter started: shown, not counted
    first = {"type": "health", "t": 1000.0, "started": 1000.0, "counters": counters}
    first["events"] = [old.to_json()]
    w = Watch(Detector(), host="n1")
    w.on_snapshot(replace(snaps[0], records=(first,)))
    assert not [k for k in scrape(w) if k[0] == "gputui_gpu_xid_total"]
    for i, t in ((2, 1000.5), (4, 1001.0)):
        ev = XidEvent(t, 48, "nvml", gpu=0)
        w.on_snapshot(
            replace(snaps[i], records=({"type": "health", "t": t, "events": [ev.to_json()]},))
        )
    got = scrape(w)
    xid = {dict(k[1])["xid"]: v for k, v in got.items() if k[0] == "gputui_gpu_xid_total"}
    assert xid == {"48": 2.0}  # two faults since the start; the old Xid 79 is not counted
    health = {
        (dict(k[1])["gpu"], dict(k[1])["health"]): v
        for k, v in got.items()
        if k[0] == "gputui_gpu_health"
    }
    assert health[("0", "failed")] == 1.0 and health[("1", "failed")] == 1.0  # 48; 79 shown
    for s in snaps[5:]:
        w.on_snapshot(s)
    assert {
        dict(k[1])["xid"]: v for k, v in scrape(w).items() if k[0] == "gputui_gpu_xid_total"
    } == {"48": 2.0}


def test_the_hardware_holding_clocks_down_is_named_beside_the_health_word():
    from synth import timeline

    from gputui.diagnose.health.judge import HealthTracker
    from gputui.diagnose.health.report import health_line, health_text

    snap = next(timeline((1, ["compute", "compute"])))
    hot = replace(snap.gpus[1], events=0x4 | 0x40)  # power cap (ordinary) + HW thermal
    snap = replace(snap, gpus=(snap.gpus[0], hot))
    rec = {"type": "health", "t": snap.t, "counters": {"0": {"lost": False}, "1": {"lost": False}}}
    t = HealthTracker()
    t.update(replace(snap, records=(rec,)))
    gpus = health_line(t, snap)["health"]["gpus"]
    assert gpus["1"]["slowdown"] == ["HW thermal slowdown"] and "slowdown" not in gpus["0"]
    assert gpus["1"]["health"] == "ok"  # a slowdown is not a sick GPU
    assert "  GPU 1 clocks held down by the hardware: HW thermal slowdown" in health_text(t, snap)
