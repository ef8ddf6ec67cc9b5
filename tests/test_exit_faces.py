"""No hang or death exits 0 on any face: every face agrees with `check`.

Two real recordings (tests/data): a rank that died on 2 x H200 (`h200x2-die-unseen`, rank 1
gone, rank 0 spinning) and a rank stuck in its data loader on 4 x H200 (`h200x4-stuck`).
For each, every face that reads a recording is walked: `check --replay` as text and as JSON,
`snapshot --replay` (its last moment), `bundle --replay` and `check --replay` of the bundle's
own trace, `merge` of the check lines, the exporter's per-job state and the dashboard's
banner, the last two from the same snapshots through the same Detector and Watcher the
faces run. `record` is walked live in tests/test_bundle_replays.py (it exits 1 for the stall
it recorded), a live death in tests/test_death_no_clock.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from gputui.collect.trace.read import read_trace
from gputui.diagnose.hang.detector import Detector
from gputui.exporter.view import Watch
from gputui.ui.widgets.banner import headline
from gputui.watch.watcher import Watcher

DATA = REPO / "tests" / "data"
CASES = {
    "death": DATA / "h200x2-die-unseen.trace.jsonl.gz",
    "hang": DATA / "h200x4-stuck.trace.jsonl.gz",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_face_exits_1_for_a_death_and_a_hang(case: str, tmp_path: Path) -> None:
    rec = str(CASES[case])
    codes: dict[str, int] = {}

    r = run_cli("check", "--replay", rec, timeout=120)
    codes["check"] = r.returncode
    r = run_cli("check", "--replay", rec, "--json", timeout=120)
    codes["check --json"] = r.returncode
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    assert any(x["state"] in ("stalled", "hung") for x in lines), case
    (tmp_path / "check.jsonl").write_text(r.stdout)

    r = run_cli("snapshot", "--replay", rec, timeout=120)
    codes["snapshot"] = r.returncode
    assert "verdict: STALLED" in r.stdout or "verdict: HUNG" in r.stdout, r.stdout[:300]

    r = run_cli("bundle", "--replay", rec, "--out", str(tmp_path / "b"), timeout=120)
    codes["bundle"] = r.returncode
    r = run_cli("check", "--replay", str(tmp_path / "b" / "trace.jsonl.gz"), timeout=120)
    codes["replay of the bundle"] = r.returncode

    r = run_cli("merge", str(tmp_path / "check.jsonl"), timeout=120)
    codes["merge"] = r.returncode

    assert codes == dict.fromkeys(codes, 1), (case, codes)

    # The exporter and the dashboard run the same Detector and Watcher on the samples.
    snaps = read_trace(rec)
    exporter = Watch(Detector(), host="testhost")
    watcher = Watcher(live=False)
    states, badges = set(), set()
    try:
        for s in snaps:
            exporter.on_snapshot(s)
            states |= {j.state for j in exporter.current()[0].jobs}
            v = watcher.update(s)
            badges.add(headline(v, s.t)[0].split()[0])
    finally:
        watcher.close()
    assert states & {"stalled", "hung"}, (case, states)
    assert badges & {"STALLED", "HUNG"}, (case, badges)
