"""`snapshot --demo` and `bundle --demo` take the moment of the verdict, not the idle end.

The demo's last sample is an idle node ("ok"): a snapshot or a bundle of it showed nothing of
the hang the demo is about. By default they now take the first moment the detector names the
hang with its evidence, and `snapshot --json` carries the verdict of the moment it shows.
"""

from __future__ import annotations

import json

from conftest import run_cli

from gputui.collect.source import ReplaySource
from gputui.commands.moment import verdict_moment, verdicts


def test_the_demos_moment_is_the_stall_with_its_culprit():
    snaps = ReplaySource.demo(realtime=False).snaps
    i = verdict_moment(snaps)
    assert i is not None and snaps[i].phase == "stall_in_loop_dumping"
    v = verdicts(snaps[: i + 1])[-1]
    assert v.state == "stalled" and v.culprit_frame == "<module> (worker2.py:37)"
    assert verdicts(snaps[:i])[-1].culprit_frame is None  # the first such moment


def test_a_recording_without_a_hang_has_no_moment():
    snaps = ReplaySource.demo(realtime=False).snaps
    train = [s for s in snaps if s.phase in ("train_init", "train")]
    assert verdict_moment(train) is None


def test_snapshot_of_the_demo_shows_the_stall_by_default():
    r = run_cli("snapshot", "--demo")
    assert r.returncode == 1, r.stderr  # the stall it shows: as check says
    first, *rest = r.stdout.splitlines()
    assert first == "verdict: STALLED: rank 1 (pid 815) is in <module> (worker2.py:37)"
    assert "  - rank 0 waits in synchronize (worker2.py:21)" in rest


def test_snapshot_json_carries_the_verdict_of_its_moment():
    d = json.loads(run_cli("snapshot", "--demo", "--json").stdout)
    v = d["verdict"]
    assert (v["state"], v["suspects"], v["suspect_pids"]) == ("stalled", [1], [815])
    assert v["culprit_frame"] == "<module> (worker2.py:37)"
    assert d["phase"] == "stall_in_loop_dumping"
    # --at still picks its own moment, with that moment's verdict
    idle = json.loads(run_cli("snapshot", "--demo", "--json", "--at", "10").stdout)
    assert idle["verdict"]["state"] == "ok" and idle["phase"] == "train_init"


def test_bundle_of_the_demo_holds_the_stall_and_the_recorded_stacks(tmp_path):
    out = tmp_path / "b"
    r = run_cli("bundle", "--demo", "--out", str(out))
    assert r.returncode == 1, r.stderr  # the stall it holds: as check says
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["state"] == "stalled" and verdict["suspect_pids"] == [815]
    assert "ODD  rank 1 (pid 815)" in (out / "stacks" / "groups.txt").read_text()
    readme = (out / "README.txt").read_text()
    assert "of demo-h200x2-hang" in readme and "no stacks to take" not in readme
