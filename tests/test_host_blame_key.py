"""`B` offers the world probe of the host NCCL RAS blames, from one node's dashboard.

The real 2 x H200 hang replayed, with one NCCL RAS record added at the stall: RAS's answer
(tests/data/ras/dead-4rank.json, NCCL's own format) says rank 3 on 10.0.0.2 is dead. No GPU
here is blamed, so the key bar offers `B probe host 10.0.0.2`. In a replay, B names the
command to run from a live node; on a live node it opens the world probe's bisect over that
host and its neighbours from --probe-hosts (here with the `local` launcher, cancelled once
it runs: tests/test_world_probe.py tests the probe itself).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hangs import hang_window
from screen import run_to_end, until

from gputui.collect.nccl.ras_model import answer_to_dict
from gputui.collect.nccl.ras_parse import parse_answer
from gputui.collect.source import ReplaySource
from gputui.ui.app import GputuiApp
from gputui.ui.screens.world import WorldScreen

pytestmark = pytest.mark.pilot

RAS = Path(__file__).parent / "data" / "ras" / "dead-4rank.json"
HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
JOB = "master:127.0.0.1:29512"  # the demo job's key


def with_dead_remote_rank(source) -> ReplaySource:
    snaps = list(source.snaps)
    i = len(snaps) - 1  # once the stall is raised: the Watcher asks RAS then
    answer = answer_to_dict(parse_answer(RAS.read_text()))
    queries = [
        {"outcome": "done", "t": snaps[i].t - 3 + k * 3, "latency_s": 0.004, "answer": answer}
        for k in range(2)
    ]
    rec = {"type": "nccl", "t": snaps[i].t, "job": JOB, "trigger": "stalled"}
    rec.update(ras={"queries": queries}, flightrec=None)
    snaps[i] = replace(snaps[i], records=(rec,))
    return ReplaySource(snaps, name="test", realtime=False)


def keybar_text(app: GputuiApp) -> str:
    return "".join(seg.text for seg in app.keybar.build(120)[0])


async def test_b_offers_the_host_ras_calls_dead_and_a_replay_names_the_command(demo_snaps):
    app = GputuiApp(
        with_dead_remote_rank(hang_window(demo_snaps)),
        probe_args={"world_hosts": HOSTS, "launcher": "local"},
    )
    async with app.run_test(size=(120, 30)) as pilot:
        await run_to_end(app, pilot)
        assert any("10.0.0.2" in f.text for f in app.verdict.ranked), app.verdict.ranked
        assert keybar_text(app).startswith(" B probe host 10.0.0.2 "), keybar_text(app)
        await pilot.press("B")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        want = "gputui probe --hosts 10.0.0.2,10.0.0.3,10.0.0.1 --bisect"
        assert any(want in m for m in said), said
        assert not isinstance(app.screen, WorldScreen)


async def test_on_a_live_node_b_opens_the_bisect_over_the_host_and_its_neighbours(
    demo_snaps, monkeypatch
):
    source = with_dead_remote_rank(hang_window(demo_snaps))
    app = GputuiApp(source, probe_args={"world_hosts": HOSTS, "launcher": "local"})
    async with app.run_test(size=(120, 30)) as pilot:
        await run_to_end(app, pilot)
        monkeypatch.setattr(source, "kind", "nvml")  # what a live node's source says
        await pilot.press("B")
        await until(pilot, lambda: isinstance(app.screen, WorldScreen))
        screen = app.screen
        assert screen.hosts == ["10.0.0.2", "10.0.0.3", "10.0.0.1"] and screen.bisect
        assert screen.opts.launcher == "local"
        assert screen.title_text == (
            "World probe of the blamed host 10.0.0.2 with 10.0.0.3, 10.0.0.1"
        )
        await pilot.press("c")  # cancel: its workers are stopped
        await until(pilot, lambda: screen.finished, timeout=60)
