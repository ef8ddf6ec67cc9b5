"""One settings object and one loop: what every face judges with (gputui.watch.settings,
gputui.watch.run, gputui.watch.judge).

The faces (check, snapshot, bundle, record, the exporter, the dashboard) used to pass
--stall-after and its neighbours through a dozen signatures and to build and close their own
Watcher. These tests hold the shared pieces to what the faces rely on: the options reach the
settings whole, a run gives the verdicts a hand-built Watcher gives and closes its Watcher,
and the exporter reads the detector only through the Judge's public face.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from gputui.cli import build_parser
from gputui.collect.source import ReplaySource
from gputui.commands.argorder import reorder
from gputui.diagnose.hang.detector import Detector
from gputui.diagnose.verdict import verdict_to_json
from gputui.watch.gatherers import DEFAULT_GATHERERS
from gputui.watch.judge import Judge
from gputui.watch.run import WatchRun, last_verdict, samples, verdicts_over
from gputui.watch.settings import WatchSettings
from gputui.watch.watcher import Watcher

REPO = Path(__file__).resolve().parents[1]


def parse(*argv: str):
    parser = build_parser()
    return parser.parse_args(reorder(parser, list(argv)))


def test_the_detector_options_of_a_command_line_reach_the_settings_whole():
    args = parse(
        "check", "--stall-after", "3", "--hang-after", "9", "--busy-limit", "120",
        "--no-auto-dump", "--debug-server", "10.0.0.2:25999",
    )  # fmt: skip
    s = WatchSettings.from_args(args, live=False)
    assert (s.stall_after, s.hang_after, s.busy_limit) == (3.0, 9.0, 120.0)
    assert s.auto_dump is False and s.live is False
    # --debug-server is bound into the debug-server gatherer, the other kinds are as they are
    kinds = dict((k, g) for k, g, _e in s.gatherers)
    defaults = dict((k, g) for k, g, _e in DEFAULT_GATHERERS)
    assert kinds.keys() == defaults.keys()
    assert kinds["debugserver"] is not defaults["debugserver"]
    assert kinds["stacks"] is defaults["stacks"]


def test_a_command_without_the_options_gets_the_command_line_defaults():
    s = WatchSettings.from_args(parse("snapshot", "--demo"))
    assert s == WatchSettings()  # equal fields: nothing of the command is lost or invented
    assert s.gatherers == DEFAULT_GATHERERS


def test_settings_are_frozen_and_given_either_whole_or_loose():
    s = WatchSettings(2.0, 5.0, live=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.stall_after = 1.0  # type: ignore[misc]
    assert WatchSettings.of(s) is s
    assert WatchSettings.of(2.0, 5.0, live=False) == s  # a test's Watcher(2.0, 5.0, ...)
    with pytest.raises(TypeError):
        WatchSettings.of(s, live=True)  # never half of each


def test_a_run_over_the_demo_gives_the_verdicts_of_a_replay_watcher(demo_snaps):
    by_hand = Watcher(10.0, 60.0, live=False)
    try:
        expected = [by_hand.update(s) for s in demo_snaps]
    finally:
        by_hand.close()
    got = verdicts_over(demo_snaps)
    assert [verdict_to_json(v) for v in got] == [verdict_to_json(v) for v in expected]
    assert any(v.alarm for v in got)  # the demo's hang is in it: the comparison is not idle
    assert verdict_to_json(last_verdict(demo_snaps)) == verdict_to_json(expected[-1])


def test_a_source_is_read_to_its_end_and_the_run_closes_its_watcher():
    source = ReplaySource.demo(realtime=False)
    try:
        with WatchRun(WatchSettings(live=False)) as run:
            n = sum(1 for _ in run.over(source))
            watcher = run.watcher
            assert run.last is not None and not watcher.pending()
    finally:
        source.close()
    assert n == len(list(samples(ReplaySource.demo(realtime=False))))
    assert watcher.closed  # its gatherers cancelled: a stall seen now starts none


def test_a_judge_around_a_detector_shows_the_detector_through_its_public_face(demo_snaps):
    det = Detector(2.0, 60.0)
    judge = Judge.around(det)
    assert (judge.settings.stall_after, judge.settings.hang_after) == (2.0, 60.0)
    for s in demo_snaps:
        v = judge.judge(s)
        if v.alarm:
            break
    assert judge.last is v and judge.detector is det
    assert dict(judge.job_verdicts) == det.job_verdicts and judge.job_verdicts
    assert dict(judge.groups) == det.memory.groups
    assert dict(judge.runs) == det.runs and list(judge.straggles) == det.straggles


def test_the_exporter_reads_no_insides_of_the_detector_or_the_watcher():
    """The exporter is a face: it reads the Judge's public face (gputui.exporter's own
    docstring), never `.memory`, `._name`s or `.detector.` of another object."""
    bad = []
    for path in sorted((REPO / "gputui" / "exporter").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            mine = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            if node.attr == "memory" or (private and not mine):
                bad.append(f"{path.name}:{node.lineno} .{node.attr}")
            if isinstance(owner, ast.Attribute) and owner.attr == "detector":
                bad.append(f"{path.name}:{node.lineno} .detector.{node.attr}")
    assert bad == []
