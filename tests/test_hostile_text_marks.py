"""Zero-width and bidi marks, and a job's own variables, never reach a terminal raw.

Round four of the hostile sweep found two holes: `snapshot`'s text job line wrote the job's
TORCHELASTIC_RUN_ID / MASTER_ADDR as they were (an OSC title sequence, a C1 CSI, U+202E in
them reached the terminal), and the marks a terminal draws in no cell (U+200B, U+200F,
U+061C ...) passed the sanitizer, so a pane's right border moved left by one per mark.
"""

from __future__ import annotations

import pytest
from hostile_harness import raw_control

from gputui.collect.model import ProcessInfo, RankInfo, Snapshot
from gputui.collect.procs.jobs import group_jobs
from gputui.commands.snapshot import snapshot_to_text
from gputui.textsafe import clean, is_clean

MARKS = ["\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u061c", "\u2060", "\ufeff"]
HOSTILE = "run\x1b]0;owned\x07\x9b31m\u202etxt.exe\u200b"


@pytest.mark.parametrize("mark", MARKS, ids=[f"U+{ord(m):04X}" for m in MARKS])
def test_a_mark_a_terminal_draws_in_no_cell_is_shown_escaped(mark):
    shown = clean(f"a{mark}b")
    assert shown == f"a\\u{ord(mark):04x}b"
    assert is_clean(shown) and not is_clean(f"a{mark}b")


def test_text_in_other_scripts_is_kept():
    for text in ("rang 1 attend", "ранг 1", "الرتبة", "ランク", "🙂"):
        assert clean(text) == text


def _job_of(rank: RankInfo) -> Snapshot:
    procs = tuple(
        ProcessInfo(pid=100 + i, ppid=1, gpus=(i,), cmdline=("python", "train.py"), rank=rank)
        for i in range(2)
    )
    return Snapshot(t=0.0, processes=procs, jobs=group_jobs(procs))


@pytest.mark.parametrize(
    "rank",
    [
        RankInfo(rank=0, world_size=2, run_id=HOSTILE),
        RankInfo(rank=0, world_size=2, master=f"{HOSTILE}:29500"),
    ],
    ids=["TORCHELASTIC_RUN_ID", "MASTER_ADDR"],
)
def test_snapshots_job_line_shows_the_jobs_variables_escaped(rank):
    text = snapshot_to_text(_job_of(rank))
    assert raw_control(text) is None, text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("job ")]
    assert "\\x1b]0;owned\\x07\\x9b31m\\u202etxt.exe\\u200b" in line
