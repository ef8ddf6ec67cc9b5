"""bench/house_counts.py counts, by its written rules, the places issue 44 names: here on a
small tree made for the test, whose every count is known."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "house_counts.py"

FILES = {
    "gputui/__init__.py": "",
    "gputui/watch/__init__.py": "",
    "gputui/watch/run.py": '''
from gputui.diagnose.detector import Detector


def judge(snaps, stall_after):
    det = Detector(stall_after, 60.0)
    return [det.update(s) for s in snaps]  # a detector loop


def live(source, stop, stall_after=10.0):
    """A docstring that says stall_after is not code."""
    w = Watcher(stall_after)
    while not stop.is_set():  # a pacing loop, and a detector loop
        snap = source.sample()
        w.update(snap)
        stop.wait(0.5)
''',
    "gputui/diagnose/__init__.py": "",
    "gputui/diagnose/detector.py": """
from gputui.diagnose.hang import culprit


class Detector:
    def update(self, snap):
        state = "stalled"  # a state spelled as a string
        return state == "hung"
""",
    "gputui/diagnose/hang/__init__.py": "",
    "gputui/diagnose/hang/culprit.py": "from gputui.diagnose import detector\n",
    "gputui/collect/__init__.py": "",
    "gputui/collect/hostlist.py": "def expand_hosts(text):\n    return text.split(',')\n",
    "gputui/commands/__init__.py": "",
    "gputui/commands/fleet.py": """
import textual  # outside ui/


def _hosts(text):
    return text.split(",")


ARGV = ["ssh", "-o", "BatchMode=yes"]
CODES = {"ok": 0, "hung": 1}  # a table by state
"""
    + "\n" * 400,
    "gputui/ui/__init__.py": "",
    "gputui/ui/keys.py": """
from textual.binding import Binding

BINDINGS = [Binding("q", "quit", "Quit", id="quit"), Binding("d", "details", "Details")]
LABELS = {"quit": "quit", "details": "details: findings"}
KEY_HINTS = (("q", "quit"), ("d", "details"))
HINT = "press d for details"
""",
}


def _counts(tree: Path, *args: str) -> dict:
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--tree", str(tree), "--json", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_each_count_follows_its_rule(tmp_path):
    for name, text in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    got = _counts(tmp_path, "--where")
    assert got["detector_built"] == 1 and got["watcher_built"] == 1
    assert got["where"]["detector_loops"] == ["gputui/watch/run.py:7", "gputui/watch/run.py:13"]
    assert got["where"]["pacing_loops"] == ["gputui/watch/run.py:13"]
    assert got["stall_after_signatures"] == 2
    assert got["stall_after_files"] == 1  # a docstring naming it is no mention
    assert got["where"]["state_literal_modules"] == [
        "gputui/commands/fleet.py",
        "gputui/diagnose/detector.py",
    ]
    # 2 Binding(, 2 help labels keyed by their actions, 2 key-bar offers, 1 "press d"
    assert got["key_declarations"] == 7
    assert (got["host_list_parsers"], got["ssh_launchers"]) == (2, 1)
    assert got["where"]["two_way_ties"] == ["gputui/diagnose: detector <-> hang"]
    assert got["where"]["files_over_400"] == ["gputui/commands/fleet.py"]
    assert got["where"]["textual_outside_ui"] == ["gputui/commands/fleet.py"]


def test_a_tree_without_gputui_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--tree", str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert r.returncode == 2 and "no gputui/ folder" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
